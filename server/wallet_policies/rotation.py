"""Rotating an agent's wallet (`admin wallet rotate`): the wallet it moves to is made first, then
installed in one transaction (server/wallets/replacement.py), the old one retired and listed.

- **A key**: given (`--from-env`), or made here and sealed at once; the agent's wallet becomes a
  `local_key` one whatever it was.
- **A `cdp` wallet, no key given**: the next account of the organisation's CDP project, under the
  agent's next stable name (`pw-<org>-<agent>-2`, `-3`: `next_account_name`), made at CDP under
  its own policy compiled from the agent's, before the transaction. The name depends only on the
  agent's wallets in the database, so a run that made the account and stopped before its commit
  is followed by one that finds the same account by name and uses it: no account is left behind.
- **Then the retired account's policy becomes sweep-only** at CDP (it may send USDC to the
  agent's current wallet, nothing else), sent at once after the commit; if CDP does not take it
  now, the wallet records why and the wallet policy job tries again (server/wallet_policies/sync.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from auth.principal import Principal
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.kit.ids import new_id
from server.models import Agent, Wallet
from server.tenancy.service import find_agent, get_agent
from server.vocabulary import WalletMode
from server.wallet_policies.accounts import account_under_policy
from server.wallet_policies.service import Compiled, compiled_for
from server.wallet_policies.sync import CdpReach, sync_retired
from server.wallets.cdp import next_account_name, sealed_cdp_credentials
from server.wallets.replacement import NothingToRotate, Rotated, rotate_wallet
from server.wallets.service import NewWallet, active_wallet, new_local_wallet


@dataclass(frozen=True)
class _NextAccount:
    """What a `cdp` wallet's rotation asks CDP for: the account's name and policy, and how to reach it."""

    name: str
    compiled: Compiled
    sealed_credentials: bytes | None


@dataclass(frozen=True)
class _Plan:
    agent: Agent
    current: Wallet
    account: _NextAccount | None  # None: the agent moves to a key


def _plan(
    session: Session, principal: Principal, agent_ref: str, *, reach: CdpReach, key_given: bool
) -> _Plan:
    agent = find_agent(session, principal, agent_ref)
    current = active_wallet(session, agent)
    if current is None:
        raise NothingToRotate(agentId=agent.id)
    account = None
    if current.mode == WalletMode.CDP and not key_given:
        account = _NextAccount(
            name=next_account_name(session, agent),
            compiled=compiled_for(session, principal, agent.id, usdc_by_network=reach.usdc_by_network),
            sealed_credentials=sealed_cdp_credentials(session, org_id=agent.org_id),
        )
    return _Plan(agent, current, account)


async def _next_account(agent: Agent, account: _NextAccount, *, reach: CdpReach) -> NewWallet:
    """The agent's next account at CDP, under its own policy (CdpError when CDP does not make it)."""
    accounts = reach.accounts(org_id=agent.org_id, sealed_credentials=account.sealed_credentials)
    address, sent = await account_under_policy(
        accounts,
        agent_id=agent.id,
        name=account.name,
        policy_id=None,
        compiled=account.compiled,
        adopt_attached=True,
    )
    return NewWallet(
        new_id("wallet"), WalletMode.CDP, address, None, None, account_name=account.name, policy=sent
    )


def _install(
    session: Session, principal: Principal, agent_id: str, *, master: MasterKey, new: NewWallet, now: datetime
) -> Rotated:
    agent = get_agent(session, principal, agent_id)
    return rotate_wallet(session, master=master, agent=agent, new=new, actor=principal.actor, now=now)


async def rotate_agent_wallet(
    db: Database,
    *,
    principal: Principal,
    agent_ref: str,
    private_key: bytes | None,
    reach: CdpReach,
    clock: Clock,
) -> Rotated:
    """Move the agent to a new wallet (see the module's docstring) and retire the one it has.
    Raises before anything is written when the new wallet cannot be made (CdpError, CdpNotConnected)."""
    plan = await db.reading(_plan, principal, agent_ref, reach=reach, key_given=private_key is not None)
    if plan.account is None:
        new = new_local_wallet(reach.master, private_key=private_key)
    else:
        new = await _next_account(plan.agent, plan.account, reach=reach)
    rotated = await db.writing(
        _install, principal, plan.agent.id, master=reach.master, new=new, now=clock.now()
    )
    if rotated.retired.mode == WalletMode.CDP:
        await sync_retired(db, principal=principal, agent_id=plan.agent.id, reach=reach, clock=clock)
    return rotated
