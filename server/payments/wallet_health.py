"""Wallet health, as get_budget and the agent's page show it: the wallet's USDC balance on each
network the policy pays on, and whether it holds less than one day of the agent's caps.

A balance is read through the chain's balance cache (server/chain/balances.py): a value it knows
is shown at once, else the chain is asked, every network at the same time, for at most
`BALANCE_TIMEOUT_S`. A network that does not answer in time, refuses, or has no RPC gives no
balance and a reason, never an error: the rest of the budget does not depend on the chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import anyio

from server.chain.service import ChainService

# The longest a balance read may add to get_budget (and to the agent's page), all networks at once.
BALANCE_TIMEOUT_S = 2.0


class BalanceUnknown(StrEnum):
    NO_RPC = "no_rpc"  # no RPC (or no USDC address) is configured for the network
    CHAIN_UNAVAILABLE = "chain_unavailable"  # the RPC refused or answered with an error
    TIMEOUT = "timeout"  # no answer within BALANCE_TIMEOUT_S


@dataclass(frozen=True)
class NetworkBalance:
    network: str
    balance_atomic: int | None
    reason: BalanceUnknown | None  # why there is no balance (None when there is one)


@dataclass(frozen=True)
class LowBalance:
    """A network where the wallet holds less than one day of the agent's caps."""

    network: str
    balance_atomic: int
    day_cap_atomic: int


async def wallet_balances(
    chain: ChainService,
    usdc_address: Callable[[str], str | None],
    *,
    owner: str,
    networks: Sequence[str],
    timeout_s: float = BALANCE_TIMEOUT_S,
    fresh: bool = False,
) -> list[NetworkBalance]:
    """The wallet's balance on each network, in the order given; at most `timeout_s` in all.
    `fresh`: asked of the chain now, never a value the process already knows."""
    found: dict[str, int | None] = {}
    asked: dict[str, str] = {}
    for network in networks:
        asset = usdc_address(network)
        if asset is None or not chain.has_rpc(network):
            continue
        known = None if fresh else chain.balances.known(network=network, asset=asset, owner=owner)
        if known is not None:
            found[network] = known
        else:
            asked[network] = asset

    async def read(network: str, asset: str) -> None:
        try:
            found[network] = await chain.balances.read(network=network, asset=asset, owner=owner)
        except Exception:  # a balance that cannot be read is unknown, never the tool's error
            found[network] = None

    if asked:
        with anyio.move_on_after(timeout_s):
            async with anyio.create_task_group() as group:
                for network, asset in asked.items():
                    group.start_soon(read, network, asset)

    balances: list[NetworkBalance] = []
    for network in networks:
        if network not in found and network not in asked:
            balances.append(NetworkBalance(network, None, BalanceUnknown.NO_RPC))
        elif network not in found:
            balances.append(NetworkBalance(network, None, BalanceUnknown.TIMEOUT))
        elif (value := found[network]) is None:
            balances.append(NetworkBalance(network, None, BalanceUnknown.CHAIN_UNAVAILABLE))
        else:
            balances.append(NetworkBalance(network, value, None))
    return balances


def low_balances(balances: Sequence[NetworkBalance], *, day_cap_atomic: int) -> list[LowBalance]:
    """The networks whose known balance is below one day of the caps (unknown ones say nothing)."""
    return [
        LowBalance(entry.network, entry.balance_atomic, day_cap_atomic)
        for entry in balances
        if entry.balance_atomic is not None and entry.balance_atomic < day_cap_atomic
    ]
