"""Giving an agent a `cdp` wallet: an EVM server account at CDP under a stable name, under its
own policy compiled from the agent's, registered as the agent's wallet.

In order: the agent's policy is compiled now; CDP is asked for the account by name (made if it
does not exist) and the policy is created (or, for the same account again, updated) and put on the
account; only then, in one transaction, are new credentials sealed (so a typo never replaces
credentials that work) and the account registered, the agent's previous wallet retired. A second
account for the same agent (a rotation, server/wallet_policies/rotation.py) is made the same way
(`account_under_policy`) under the next generation's name (`next_account_name`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlmodel import Session

from auth.principal import Principal
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.models import Agent, Wallet
from server.signers.cdp_api import CdpAccounts
from server.signers.cdp_credentials import CdpCredentials
from server.signers.loading import cdp_accounts
from server.tenancy.service import find_agent, find_org
from server.vocabulary import WalletMode
from server.wallet_policies.service import Compiled, compiled_for, hold_policy, send_policy
from server.wallets.cdp import (
    CdpNotConnected,
    account_name_for,
    check_account_free,
    check_account_name,
    register_cdp_wallet,
    save_cdp_credentials,
    sealed_cdp_credentials,
)
from server.wallets.service import SentPolicy, active_wallet


@dataclass(frozen=True)
class _Plan:
    agent: Agent
    account_name: str
    compiled: Compiled
    sealed_credentials: bytes | None
    previous: Wallet | None  # the agent's wallet now, if any


def _plan(
    session: Session,
    principal: Principal,
    agent_ref: str,
    *,
    account_name: str | None,
    usdc_by_network: Mapping[str, str],
) -> _Plan:
    agent = find_agent(session, principal, agent_ref)
    name = check_account_name(account_name) if account_name else account_name_for(agent.org_id, agent.id)
    check_account_free(session, agent=agent, account_name=name)
    return _Plan(
        agent=agent,
        account_name=name,
        compiled=compiled_for(session, principal, agent.id, usdc_by_network=usdc_by_network),
        sealed_credentials=sealed_cdp_credentials(session, org_id=agent.org_id),
        previous=active_wallet(session, agent),
    )


async def account_under_policy(
    accounts: CdpAccounts,
    *,
    agent_id: str,
    name: str,
    policy_id: str | None,
    compiled: Compiled,
    adopt_attached: bool = False,
) -> tuple[str, SentPolicy]:
    """The account named `name` at CDP (made if it does not exist) under a policy holding
    `compiled`: `policy_id` updated in place, or a new one. With `adopt_attached`, an account that
    exists already keeps the policy it is under (made for it by an earlier run that did not get
    to record it), updated in place. Its address and what CDP holds; CdpError when CDP does not."""
    idempotency_key = f"{agent_id}:{name}"
    existing = await accounts.account_named(name)
    if existing is None:
        # The policy first, so the account never exists at CDP without it.
        sent, _ = await hold_policy(
            accounts, policy_id=policy_id, compiled=compiled, idempotency_key=idempotency_key
        )
        return (await accounts.create_account(name, policy_id=sent.policy_id)).address, sent
    if adopt_attached and policy_id is None and existing.policies:
        policy_id = existing.policies[0]
    sent, _ = await send_policy(
        accounts,
        address=existing.address,
        policy_id=policy_id,
        compiled=compiled,
        idempotency_key=idempotency_key,
    )
    return existing.address, sent


def _register(
    session: Session,
    principal: Principal,
    plan: _Plan,
    *,
    master: MasterKey,
    credentials: CdpCredentials | None,
    address: str,
    sent: SentPolicy,
    clock: Clock,
) -> Wallet:
    now = clock.now()
    if credentials is not None:
        org = find_org(session, principal, plan.agent.org_id)
        save_cdp_credentials(
            session, master=master, org=org, credentials=credentials, actor=principal.actor, now=now
        )
    return register_cdp_wallet(
        session,
        agent=plan.agent,
        address=address,
        account_name=plan.account_name,
        policy=sent,
        actor=principal.actor,
        now=now,
    )


async def provision_cdp_account(
    db: Database,
    *,
    principal: Principal,
    agent_ref: str,
    master: MasterKey,
    api_url: str,
    usdc_by_network: Mapping[str, str],
    clock: Clock,
    account_name: str | None = None,
    credentials: CdpCredentials | None = None,
) -> Wallet:
    """The agent's CDP account (by `account_name`, or its stable name), under the agent's policy
    compiled now, registered as its wallet. `credentials` are the organisation's new ones; without
    them the sealed ones are used (CdpNotConnected when it has none). Raises CdpError when CDP
    does not do its part, and then nothing is written."""
    plan = await db.reading(
        _plan, principal, agent_ref, account_name=account_name, usdc_by_network=usdc_by_network
    )
    if credentials is not None:
        accounts = CdpAccounts(credentials, api_url=api_url)
    elif plan.sealed_credentials is not None:
        accounts = cdp_accounts(
            master, org_id=plan.agent.org_id, sealed=plan.sealed_credentials, api_url=api_url
        )
    else:
        raise CdpNotConnected()
    previous = plan.previous
    # The same account again keeps its policy at CDP (updated in place); another gets its own.
    policy_id = (
        previous.cdp_policy_id
        if previous is not None
        and previous.mode == WalletMode.CDP
        and previous.account_name == plan.account_name
        else None
    )
    address, sent = await account_under_policy(
        accounts, agent_id=plan.agent.id, name=plan.account_name, policy_id=policy_id, compiled=plan.compiled
    )
    return await db.writing(
        _register,
        principal,
        plan,
        master=master,
        credentials=credentials,
        address=address,
        sent=sent,
        clock=clock,
    )
