"""An agent's wallets as the command line, the admin API and the agent's page list them: the current
one and every retired one, newest first, each with its USDC balance on every network that can be
asked (read from the chain now, for all wallets at once, within the balance reads' time limit)
and its sweeps, so what a rotation left behind is in plain sight."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio
from sqlmodel import Session

from auth.principal import Principal
from server.chain.service import ChainService
from server.kit.db import Database
from server.models import Agent, Wallet, WalletSweep
from server.payments.repository import SweepRepository
from server.payments.wallet_health import NetworkBalance, wallet_balances
from server.settings import Settings
from server.tenancy.service import find_agent
from server.wallets.service import wallets_of

SWEEPS_SHOWN = 50


@dataclass(frozen=True)
class ListedWallet:
    wallet: Wallet
    balances: list[NetworkBalance]
    sweeps: list[WalletSweep]  # newest first

    @property
    def current(self) -> bool:
        return self.wallet.retired_at is None


@dataclass(frozen=True)
class AgentWallets:
    agent: Agent
    wallets: list[ListedWallet]

    @property
    def retired(self) -> list[ListedWallet]:
        return [listed for listed in self.wallets if not listed.current]


def sweeps_of(session: Session, principal: Principal, agent: Agent) -> list[WalletSweep]:
    """The agent's latest sweeps, newest first."""
    return list(SweepRepository(session).of_agent(principal, agent_id=agent.id, limit=SWEEPS_SHOWN))


@dataclass(frozen=True)
class _Rows:
    agent: Agent
    wallets: list[Wallet]
    sweeps: list[WalletSweep]


def _rows(session: Session, principal: Principal, agent_ref: str) -> _Rows:
    agent = find_agent(session, principal, agent_ref)
    return _Rows(agent, wallets_of(session, agent), sweeps_of(session, principal, agent))


def balance_networks(agent: Agent, chain: ChainService, settings: Settings) -> list[str]:
    """The agent's own network first, then every other network a balance can be read on."""
    readable = [network for network in chain.networks if settings.usdc_address(network)]
    return [agent.network, *(network for network in readable if network != agent.network)]


async def listed(
    chain: ChainService,
    settings: Settings,
    agent: Agent,
    wallets: Sequence[Wallet],
    sweeps: Sequence[WalletSweep],
) -> list[ListedWallet]:
    """`wallets` with their balances, read from the chain now, all at once, and their sweeps."""
    networks = balance_networks(agent, chain, settings)
    balances: dict[str, list[NetworkBalance]] = {}

    async def read(wallet: Wallet) -> None:
        balances[wallet.id] = await wallet_balances(
            chain, settings.usdc_address, owner=wallet.address, networks=networks, fresh=True
        )

    async with anyio.create_task_group() as group:
        for wallet in wallets:
            group.start_soon(read, wallet)
    return [
        ListedWallet(wallet, balances[wallet.id], [sweep for sweep in sweeps if sweep.wallet_id == wallet.id])
        for wallet in wallets
    ]


async def agent_wallets(
    db: Database, chain: ChainService, settings: Settings, principal: Principal, *, agent: str
) -> AgentWallets:
    rows = await db.reading(_rows, principal, agent)
    return AgentWallets(rows.agent, await listed(chain, settings, rows.agent, rows.wallets, rows.sweeps))
