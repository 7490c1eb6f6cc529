"""Each durable step of a sweep, one unit of work each, under the organisation's lock.

A sweep is authorised for the whole balance a retired wallet holds on one network, with the
agent's current wallet as its only payee and a nonce derived from its id; a retired wallet has at
most one open sweep per network (`open_slot`, unique). Then, in order: its signature is recorded
before anything is sent (durably), then the transaction carrying it before that is sent (durably),
then how it ended, from the chain. Each step moves the sweep only from the state before it, so two
runs of the command at once make one sweep, one signature and one transaction between them.

Not a payment: a sweep moves the organisation's money between its own wallets, so no cap counts
it, and the payee is no seller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlmodel import Session

from auth.principal import Principal
from server.audit.service import record as audit
from server.chain.evidence import SettlementFinding
from server.chain.submission import SignedTransaction
from server.kit.db import lock_org
from server.kit.ids import new_id
from server.kit.money import format_usd
from server.models import Agent, PaymentIntent, Wallet, WalletSweep
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import IntentRepository, SweepRepository
from server.payments.settlement.checks import MISMATCH_PREFIX
from server.payments.sweeps.errors import (
    NoRetiredWallet,
    PaymentsStillOpen,
    SweepRefusedAtCdp,
    WalletAddressInUse,
    WalletNotFound,
    WalletNotRetired,
)
from server.signers.errors import SignRefused
from server.signers.intents import AuthorisedIntent, IntentKind
from server.tenancy.service import find_agent, get_agent
from server.vocabulary import SweepStatus
from server.wallets.cdp import record_cdp_policy_refusal
from server.wallets.service import active_wallet, pays_for_another_agent, record_sign_refused, wallets_of
from server.x402.transfer_authorization import (
    CLOCK_SKEW_SECONDS,
    MAX_WINDOW_SECONDS,
    TransferAuthorization,
    derive_nonce,
    validity_window,
)

OPEN = (SweepStatus.AUTHORIZED, SweepStatus.SIGNED, SweepStatus.SUBMITTED)
EVENT_PREFIX = "wallet.sweep_"


def unix_time(seconds: int) -> str:
    """A window's edge as people and JSON read times (ISO 8601, UTC)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def open_slot(wallet_id: str, network: str) -> str:
    return f"{wallet_id} {network}"


@dataclass(frozen=True)
class Targets:
    """What a sweep command works on: the agent, its current wallet and the retired ones chosen."""

    agent: Agent
    current: Wallet | None
    retired: list[Wallet]


def sweep_targets(
    session: Session, principal: Principal, *, agent_ref: str, wallet_ref: str | None
) -> Targets:
    """The agent's retired wallets, or the one `wallet_ref` names (by id or address)."""
    agent = find_agent(session, principal, agent_ref)
    wallets = wallets_of(session, agent)
    current = next((wallet for wallet in wallets if wallet.retired_at is None), None)
    retired = [wallet for wallet in wallets if wallet.retired_at is not None]
    if wallet_ref is None:
        if not retired:
            raise NoRetiredWallet(agentId=agent.id)
        return Targets(agent, current, retired)
    named = [
        wallet for wallet in wallets if wallet_ref.lower() in (wallet.id.lower(), wallet.address.lower())
    ]
    if not named:
        raise WalletNotFound(agentId=agent.id)
    if any(wallet.retired_at is None for wallet in named):
        raise WalletNotRetired(walletId=named[0].id)
    return Targets(agent, current, named)


def open_sweep(session: Session, principal: Principal, *, wallet_id: str, network: str) -> WalletSweep | None:
    return SweepRepository(session).open_in(principal, slot=open_slot(wallet_id, network))


def open_payments_from(session: Session, *, payer: str, network: str, now: datetime) -> list[PaymentIntent]:
    """Payments from `payer` on `network`, in any organisation, whose money may still move."""
    return list(
        IntentRepository(session).open_from_payer(
            payer=payer,
            network=network,
            now_unix=int(now.timestamp()),
            never_sent=NEVER_SENT_FAILURES,
            mismatch_prefix=MISMATCH_PREFIX,
        )
    )


def current_wallet_of(session: Session, principal: Principal, *, agent_id: str) -> Wallet | None:
    return active_wallet(session, get_agent(session, principal, agent_id))


def authorise_sweep(
    session: Session,
    principal: Principal,
    *,
    agent_id: str,
    wallet_id: str,
    network: str,
    asset: str,
    amount_atomic: int,
    now: datetime,
) -> WalletSweep:
    """A sweep of `amount_atomic` from the retired wallet to the agent's current wallet, or the
    sweep already open for that wallet and network (another run's: that one goes on)."""
    agent = get_agent(session, principal, agent_id)
    lock_org(session, agent.org_id)
    sweeps = SweepRepository(session)
    slot = open_slot(wallet_id, network)
    existing = sweeps.open_in(principal, slot=slot)
    if existing is not None:
        return existing
    wallets = wallets_of(session, agent)
    retired = next((wallet for wallet in wallets if wallet.id == wallet_id), None)
    current = next((wallet for wallet in wallets if wallet.retired_at is None), None)
    if retired is None:
        raise WalletNotFound(agentId=agent.id)
    if retired.retired_at is None or current is None or current.address.lower() == retired.address.lower():
        raise WalletNotRetired(walletId=retired.id)
    if pays_for_another_agent(session, address=retired.address, agent=agent):
        raise WalletAddressInUse(walletId=retired.id)
    still_open = open_payments_from(session, payer=retired.address, network=network, now=now)
    if still_open:
        until = max(intent.valid_before for intent in still_open)
        raise PaymentsStillOpen(walletId=retired.id, payments=len(still_open), until=unix_time(until))
    valid_after, valid_before = validity_window(int(now.timestamp()), MAX_WINDOW_SECONDS - CLOCK_SKEW_SECONDS)
    sweep_id = new_id("sweep")
    sweep = WalletSweep(
        id=sweep_id,
        org_id=agent.org_id,
        agent_id=agent.id,
        wallet_id=retired.id,
        to_wallet_id=current.id,
        network=network,
        asset=asset,
        payer=retired.address,
        pay_to=current.address,
        amount_atomic=amount_atomic,
        nonce=derive_nonce(sweep_id),
        valid_after=valid_after,
        valid_before=valid_before,
        status=SweepStatus.AUTHORIZED,
        open_slot=slot,
        created_by=principal.actor,
        created_at=now,
        updated_at=now,
    )
    sweeps.add(sweep)
    _audit(session, principal, sweep, "authorized", now, {"nonce": sweep.nonce})
    return sweep


def to_sign(sweep: WalletSweep, current: Wallet | None) -> AuthorisedIntent:
    """The sweep as the signer checks it: the payee it recorded, and the agent's current wallet as
    read now, which must be that payee."""
    return AuthorisedIntent(
        id=sweep.id,
        status="authorized" if sweep.status == SweepStatus.AUTHORIZED else str(sweep.status),
        network=sweep.network,
        asset=sweep.asset,
        pay_to=sweep.pay_to,
        amount_atomic=sweep.amount_atomic,
        payer=sweep.payer,
        nonce=sweep.nonce,
        valid_after=sweep.valid_after,
        valid_before=sweep.valid_before,
        kind=IntentKind.SWEEP,
        current_wallet=None if current is None else current.address,
    )


def authorization_of(sweep: WalletSweep) -> TransferAuthorization:
    return TransferAuthorization(
        payer=sweep.payer,
        pay_to=sweep.pay_to,
        value=sweep.amount_atomic,
        valid_after=sweep.valid_after,
        valid_before=sweep.valid_before,
        nonce=sweep.nonce,
    )


def _locked(session: Session, principal: Principal, sweep_id: str) -> WalletSweep:
    sweeps = SweepRepository(session)
    sweep = sweeps.get_readable(principal, sweep_id)
    if sweep is None:
        raise WalletNotFound()
    lock_org(session, sweep.org_id)
    return sweeps.refresh(sweep)


def record_signature(
    session: Session, principal: Principal, *, sweep_id: str, signature: str, now: datetime
) -> WalletSweep:
    """Signed, before the signature goes anywhere; a sweep another run signed first stays as it is."""
    sweep = _locked(session, principal, sweep_id)
    if sweep.status != SweepStatus.AUTHORIZED:
        return sweep
    sweep.status, sweep.signature, sweep.signed_at, sweep.updated_at = SweepStatus.SIGNED, signature, now, now
    session.add(sweep)
    _audit(session, principal, sweep, "signed", now, {})
    return sweep


def record_transaction(
    session: Session,
    principal: Principal,
    *,
    sweep_id: str,
    signed: SignedTransaction,
    replacing: str | None,
    now: datetime,
) -> WalletSweep:
    """The transaction carrying the authorisation, kept before it is sent: a later run sends this
    same one again. `replacing`: the hash of a recorded one the node refused, which this one takes
    the place of. Another run's, recorded first, stays."""
    sweep = _locked(session, principal, sweep_id)
    expected = SweepStatus.SIGNED if replacing is None else SweepStatus.SUBMITTED
    if sweep.status != expected or sweep.tx_hash != replacing:
        return sweep
    sweep.status, sweep.raw_transaction, sweep.tx_hash = SweepStatus.SUBMITTED, signed.raw, signed.tx_hash
    sweep.submitted_by, sweep.submitted_at, sweep.updated_at = signed.sender, now, now
    session.add(sweep)
    replaced = {"txHash": replacing} if replacing else None
    data = {"txHash": signed.tx_hash, "gasPayer": signed.sender, "replaced": replaced}
    _audit(session, principal, sweep, "submitted", now, data)
    return sweep


def end_sweep(
    session: Session,
    principal: Principal,
    *,
    sweep_id: str,
    to: SweepStatus,
    now: datetime,
    finding: SettlementFinding | None = None,
    failure_code: str | None = None,
    lapse_block: int | None = None,
) -> WalletSweep:
    """Close an open sweep: settled or flagged from the chain's finding, expired on the chain's
    proof that it can never be used, or failed unsigned. Its slot frees for the next sweep."""
    sweep = _locked(session, principal, sweep_id)
    if sweep.status not in OPEN:
        return sweep  # another run closed it first
    data: dict[str, Any] = {}
    if finding is not None:
        sweep.tx_hash = finding.tx_hash
        data["txHash"] = finding.tx_hash
        if finding.mismatch is not None:
            failure_code = f"{MISMATCH_PREFIX}_{finding.mismatch}"
            data["actualPayTo"] = finding.actual_pay_to
            data["actualAmountUsd"] = (
                None if finding.actual_amount is None else format_usd(finding.actual_amount, atomic=True)
            )
    sweep.status, sweep.failure_code, sweep.lapse_block = to, failure_code, lapse_block
    sweep.open_slot, sweep.ended_at, sweep.updated_at = None, now, now
    session.add(sweep)
    _audit(
        session,
        principal,
        sweep,
        str(to),
        now,
        {**data, "failureCode": failure_code, "lapseBlock": lapse_block},
    )
    return sweep


def refuse_signature(
    session: Session,
    principal: Principal,
    *,
    sweep_id: str,
    wallet: Wallet,
    refused: SignRefused,
    now: datetime,
) -> WalletSweep:
    """The signer refused: nothing was signed, the sweep fails, and the wallet's audit says why."""
    record_sign_refused(
        session, wallet=wallet, intent_id=sweep_id, refused=refused, actor=principal.actor, now=now
    )
    return end_sweep(
        session, principal, sweep_id=sweep_id, to=SweepStatus.FAILED, now=now, failure_code="sign_refused"
    )


def refuse_at_cdp(
    session: Session, principal: Principal, *, sweep_id: str, wallet: Wallet, now: datetime
) -> WalletSweep:
    """CDP's policy for the retired account refused: nothing was signed, the sweep fails, and the
    wallet's audit says CDP refused it."""
    record_cdp_policy_refusal(session, wallet=wallet, intent_id=sweep_id, actor=principal.actor, now=now)
    return end_sweep(
        session,
        principal,
        sweep_id=sweep_id,
        to=SweepStatus.FAILED,
        now=now,
        failure_code=SweepRefusedAtCdp.code,
    )


def _audit(
    session: Session,
    principal: Principal,
    sweep: WalletSweep,
    what: str,
    now: datetime,
    extra: dict[str, Any],
) -> None:
    audit(
        session,
        org_id=sweep.org_id,
        type=EVENT_PREFIX + what,
        actor=principal.actor,
        agent_id=sweep.agent_id,
        subject_id=sweep.id,
        data={
            "wallet": sweep.wallet_id,
            "from": sweep.payer,
            "to": sweep.pay_to,
            "network": sweep.network,
            "amountUsd": format_usd(sweep.amount_atomic, atomic=True),
            **{key: value for key, value in extra.items() if value is not None},
        },
        now=now,
    )
