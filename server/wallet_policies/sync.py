"""Keeping every `cdp` wallet's own policy at CDP in step with its agent's, and checking it.

**Retired accounts too.** A `cdp` wallet rotated away keeps its account at CDP until what is left in
it is swept: its policy there becomes sweep-only (a transfer of USDC to the agent's current wallet,
nothing else), and follows the agent's current wallet when it is rotated again.

**Where the sync runs, and why there.** In a background job (`WalletPolicySync`, every 15 seconds,
in one process at a time), never inside the request that changed a policy. A policy change (a cap
lowered on the dashboard, a host added by a payment through the catalog route, a change confirmed
with a passkey) must neither wait for CDP nor fail because CDP is away, and a catalog change alters
pinned payees without any agent's policy changing. So each pass compiles every `cdp` wallet's
document from the database as it is and sends those whose digest differs from what CDP last
accepted: what is due is derived from the database every time, so nothing can be dropped from a
queue. A failure is recorded on the wallet (its code, how many in a row, the next attempt), logged,
audited at the first failure of a streak, shown on the agent's page and by `paywarden admin wallet
cdp-policy check`, and tried again later (15 s, doubling, at most every 15 minutes); `paywarden
admin wallet cdp-policy sync` sends at once. Meanwhile payments stay within both policies: the
agent's as it is now, which Paywarden applies, and the one CDP last took, which CDP applies (a
payment only CDP's older policy refuses fails with `cdp_policy_refused`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from auth.principal import Principal
from server.catalog.service import listed_pins
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.kit.errors import PaywardenError
from server.models import Agent, Wallet
from server.policy.model import Policy
from server.signers.cdp_api import CdpAccounts, CdpClientPool
from server.signers.errors import CdpError, SignerError
from server.signers.loading import cdp_accounts
from server.tenancy.service import agent_with_policy, find_agent
from server.vocabulary import WalletMode
from server.wallet_policies.service import (
    SYSTEM,
    Compiled,
    Drift,
    check_drift,
    compile_policy,
    compile_sweep,
    send_policy,
)
from server.wallets.cdp import (
    CdpNotConnected,
    NotACdpWallet,
    cdp_wallets,
    record_policy_failure,
    record_policy_sent,
    record_policy_version,
    retired_cdp_accounts,
    sealed_cdp_credentials,
)
from server.wallets.service import active_wallet

log = logging.getLogger("paywarden.wallet_policies")

CREDENTIALS_UNREADABLE = "cdp_credentials_unreadable"


@dataclass(frozen=True)
class WalletPolicyWork:
    """One wallet, the document its policy at CDP should be now, and how to reach CDP for it."""

    wallet: Wallet
    compiled: Compiled
    sealed_credentials: bytes | None


@dataclass(frozen=True)
class CdpReach:
    """What every call to CDP needs besides the organisation's sealed credentials."""

    master: MasterKey
    api_url: str
    usdc_by_network: Mapping[str, str]
    pool: CdpClientPool | None = None  # a server's open clients; None: a client per call

    def accounts(self, *, org_id: str, sealed_credentials: bytes | None) -> CdpAccounts:
        """The organisation's accounts and policies at CDP (CdpNotConnected without credentials)."""
        if sealed_credentials is None:
            raise CdpNotConnected()
        return cdp_accounts(
            self.master, org_id=org_id, sealed=sealed_credentials, api_url=self.api_url, pool=self.pool
        )


async def push_policy(
    db: Database, work: WalletPolicyWork, *, reach: CdpReach, clock: Clock, actor: str
) -> Wallet:
    """Send the wallet's policy to CDP and record the outcome on the wallet: what CDP holds now, or
    the failure and when to try again (never raised: the row says it)."""
    wallet = work.wallet
    try:
        accounts = reach.accounts(org_id=wallet.org_id, sealed_credentials=work.sealed_credentials)
        sent, created = await send_policy(
            accounts,
            address=wallet.address,
            policy_id=wallet.cdp_policy_id,
            compiled=work.compiled,
            idempotency_key=wallet.id,
        )
    except (CdpError, CdpNotConnected, SignerError) as exc:
        code = exc.code if isinstance(exc, PaywardenError) else CREDENTIALS_UNREADABLE
        log.warning("the policy of wallet %s was not sent to CDP: %s", wallet.id, code)
        return await db.writing(
            record_policy_failure, wallet=wallet, error=code, actor=actor, now=clock.now()
        )
    return await db.writing(
        record_policy_sent, wallet=wallet, policy=sent, created=created, actor=actor, now=clock.now()
    )


class WalletPolicySync:
    """The background job: every `cdp` wallet whose policy at CDP is not the one compiled now."""

    name = "wallet-policies"
    interval_seconds = 15.0

    def __init__(self, *, db: Database, clock: Clock, reach: CdpReach) -> None:
        self._db = db
        self._clock = clock
        self._reach = reach

    def _due(self, session: Session, now: datetime) -> list[WalletPolicyWork]:
        pins = listed_pins(session)
        usdc = self._reach.usdc_by_network
        compiled: list[tuple[Wallet, Compiled]] = []
        for wallet in cdp_wallets(session):
            agent, policy = agent_with_policy(session, SYSTEM, wallet.agent_id)
            compiled.append((wallet, compile_policy(agent, policy, usdc_by_network=usdc, pins=pins)))
        for retired in retired_cdp_accounts(session):
            agent, policy = agent_with_policy(session, SYSTEM, retired.wallet.agent_id)
            sweep = compile_sweep(agent, policy, payee=retired.payee, usdc_by_network=usdc)
            compiled.append((retired.wallet, sweep))
        due: list[WalletPolicyWork] = []
        for wallet, document in compiled:
            if document.digest == wallet.cdp_policy_digest:
                record_policy_version(session, wallet=wallet, version=document.version)
            elif wallet.cdp_policy_retry_at is None or wallet.cdp_policy_retry_at <= now:
                sealed = sealed_cdp_credentials(session, org_id=wallet.org_id)
                due.append(WalletPolicyWork(wallet, document, sealed))
        return due

    async def run_once(self) -> int:
        """One pass: how many wallets' policies were sent (or tried)."""
        due = await self._db.writing(self._due, self._clock.now())
        for work in due:
            await push_policy(self._db, work, reach=self._reach, clock=self._clock, actor=SYSTEM.actor)
        return len(due)


# -- one agent, from the command line or a page ---------------------------------------------


def wallet_work(
    session: Session, agent: Agent, policy: Policy, wallet: Wallet, *, usdc_by_network: Mapping[str, str]
) -> WalletPolicyWork:
    """The `cdp` wallet, its agent's policy compiled now, and its organisation's sealed credentials."""
    compiled = compile_policy(agent, policy, usdc_by_network=usdc_by_network, pins=listed_pins(session))
    return WalletPolicyWork(wallet, compiled, sealed_cdp_credentials(session, org_id=agent.org_id))


def agent_work(
    session: Session, principal: Principal, agent_ref: str, *, usdc_by_network: Mapping[str, str]
) -> WalletPolicyWork:
    """`wallet_work` for an agent by id or name (NotACdpWallet when it has no `cdp` wallet)."""
    agent = find_agent(session, principal, agent_ref)
    wallet = active_wallet(session, agent)
    if wallet is None or wallet.mode != WalletMode.CDP:
        raise NotACdpWallet()
    _, policy = agent_with_policy(session, principal, agent.id)
    return wallet_work(session, agent, policy, wallet, usdc_by_network=usdc_by_network)


@dataclass(frozen=True)
class AgentSync:
    """What `sync_agent` sent: the agent's current `cdp` wallet, if it has one, and its retired
    `cdp` accounts' sweep-only policies."""

    wallet: Wallet | None
    retired: list[Wallet]

    @property
    def failed(self) -> bool:
        sent = self.retired if self.wallet is None else [self.wallet, *self.retired]
        return any(wallet.cdp_policy_error is not None for wallet in sent)


def _agent_works(
    session: Session, principal: Principal, agent_ref: str, *, usdc_by_network: Mapping[str, str]
) -> tuple[WalletPolicyWork | None, list[WalletPolicyWork]]:
    agent = find_agent(session, principal, agent_ref)
    retired = retired_work(session, principal, agent.id, usdc_by_network=usdc_by_network)
    try:
        current = agent_work(session, principal, agent.id, usdc_by_network=usdc_by_network)
    except NotACdpWallet:
        if not retired:
            raise
        current = None
    return current, retired


async def sync_agent(
    db: Database, *, principal: Principal, agent_ref: str, reach: CdpReach, clock: Clock
) -> AgentSync:
    """Send the agent's wallet policy to CDP now, whatever the job's schedule (also to repair a
    policy changed at CDP behind Paywarden's back), and each retired account's sweep-only one.
    NotACdpWallet when the agent has no `cdp` wallet, current or retired."""
    current, retired = await db.reading(
        _agent_works, principal, agent_ref, usdc_by_network=reach.usdc_by_network
    )
    actor = principal.actor
    return AgentSync(
        None if current is None else await push_policy(db, current, reach=reach, clock=clock, actor=actor),
        [await push_policy(db, work, reach=reach, clock=clock, actor=actor) for work in retired],
    )


def retired_work(
    session: Session, principal: Principal, agent_id: str, *, usdc_by_network: Mapping[str, str]
) -> list[WalletPolicyWork]:
    """The agent's retired `cdp` accounts, each with its sweep-only document compiled now."""
    agent, policy = agent_with_policy(session, principal, agent_id)
    sealed = sealed_cdp_credentials(session, org_id=agent.org_id)
    return [
        WalletPolicyWork(
            retired.wallet,
            compile_sweep(agent, policy, payee=retired.payee, usdc_by_network=usdc_by_network),
            sealed,
        )
        for retired in retired_cdp_accounts(session, agent=agent)
    ]


async def sync_retired(
    db: Database, *, principal: Principal, agent_id: str, reach: CdpReach, clock: Clock
) -> list[Wallet]:
    """Send the sweep-only policy of each of the agent's retired `cdp` accounts whose policy at CDP
    is not it yet (right after a rotation, rather than at the job's next pass)."""
    works = await db.reading(retired_work, principal, agent_id, usdc_by_network=reach.usdc_by_network)
    return [
        await push_policy(db, work, reach=reach, clock=clock, actor=principal.actor)
        for work in works
        if work.compiled.digest != work.wallet.cdp_policy_digest
    ]


async def drift_of(work: WalletPolicyWork, *, reach: CdpReach) -> Drift:
    """What CDP holds for the wallet compared with what Paywarden compiles now (CdpError when CDP
    cannot say, CdpNotConnected without credentials)."""
    accounts = reach.accounts(org_id=work.wallet.org_id, sealed_credentials=work.sealed_credentials)
    return await check_drift(accounts, wallet=work.wallet, compiled=work.compiled)
