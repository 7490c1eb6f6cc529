"""The ledger of payment intents: decisions, atomic reservations, holds, and legal state changes.

Reservation reads every counted spend, decides and writes the intent in one transaction that
holds the organisation's write lock (PostgreSQL row lock, SQLite IMMEDIATE transaction), so no two
payments can both fit under a cap that has room for one, across any number of processes. A held
payment is written as a `created` intent with its approval; the retry after approval authorises
that same intent, after deciding again, in one such transaction too. A payment signed ahead (a
`draft_intent` its wallet signed in memory) is authorised and recorded `submitted` by that same
transaction: the one durable commit before its signature leaves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import datetime
from functools import cached_property
from typing import Any, Literal

from sqlmodel import Session

from auth.principal import Principal
from server.approvals import service as approvals
from server.audit.service import Written, head_seq, written_since
from server.audit.service import record as audit
from server.kit.db import lock_org, locked_from_the_start
from server.kit.ids import new_id
from server.kit.jsonutil import canonical
from server.kit.money import format_usd, usd_to_atomic
from server.models import Agent, Approval, PaymentIntent
from server.payments.circuits import count_outcome
from server.payments.errors import (
    AgentDisabled,
    ApprovalMismatch,
    IllegalTransition,
    PaymentNotFound,
    WalletChanged,
)
from server.payments.repository import IntentRepository, PaymentFilter
from server.payments.states import SETTLED_STAYS, transition
from server.payments.usage import context_for, usage_for
from server.policy.engine import Context, Decision, Payment, RuleSet, Usage, compile_rules, evaluate
from server.policy.model import Policy
from server.policy.rulebook import rules_for_agent
from server.policy.rules import Rule
from server.policy.service import current_policy
from server.tenancy.service import disabled_now
from server.vocabulary import ApprovalStatus, HoldReason, IntentStatus, Origin, WalletMode
from server.wallets.service import is_retired_payer
from server.x402.challenge import Offer
from server.x402.selection import Selection
from server.x402.transfer_authorization import derive_nonce, validity_window


@dataclass(frozen=True)
class PurchaseFacts:
    """Everything the reservation needs to know about the purchase, fixed before it starts."""

    idempotency_key: str
    fingerprint: str
    method: str
    host: str
    path: str
    resource: str
    origin: Origin | None
    x402_version: int
    resource_host: str | None
    selection: Selection
    payer: str
    wallet_mode: WalletMode | None  # None only for a quote from an agent without a wallet
    instruction_like_description: bool = False
    via_paths: tuple[str, ...] = ()  # paths requested before the one that asked for payment

    def payment(self) -> Payment:
        return Payment(
            host=self.host,
            path=self.path,
            network=self.selection.network,
            asset="USDC",
            pay_to=self.selection.pay_to,
            amount_atomic=self.selection.amount_atomic,
            resource_host=self.resource_host,
            instruction_like_description=self.instruction_like_description,
            via_paths=self.via_paths,
        )


# `submitted`: a draft signed ahead was authorised and recorded as leaving, in one transaction.
ReservationKind = Literal["existing", "denied", "held", "queue_full", "authorized", "submitted"]


@dataclass(frozen=True)
class Reservation:
    kind: ReservationKind
    decision: Decision | None = None
    intent: PaymentIntent | None = None  # the new intent, or the one the key already names
    approval: Approval | None = None


def decision_record(decision: Decision, facts: PurchaseFacts) -> dict[str, Any]:
    """What an intent, an approval and the audit keep of a decision: codes, versions, the payment."""
    return {
        "outcome": decision.outcome,
        "reasons": list(decision.reasons),
        "policyVersion": decision.policy_version,
        "versions": decision.versions,
        "holdReason": decision.hold_reason,
        "holdReasons": list(decision.hold_reasons),
        "rules": list(decision.rules),
        "ruleScopes": dict(decision.rule_scopes),
        "host": facts.host,
        "path": facts.path,
        "resource": facts.resource,
        "viaPaths": list(facts.via_paths),
        "network": facts.selection.network,
        "payTo": facts.selection.pay_to,
        "amountUsd": format_usd(facts.selection.amount_atomic, atomic=True),
    }


@dataclass(frozen=True)
class Standing:
    """What the policy judges an agent's payments against now: its policy in force, every rule
    that applies to it, and the spend counted for it and for each rule."""

    policy: Policy
    rules: list[Rule]
    usage: Usage

    @cached_property
    def ruleset(self) -> RuleSet:
        """The rules compiled once for every payment judged against this standing."""
        return compile_rules(self.rules)

    def judge(self, payment: Payment, context: Context) -> Decision:
        return evaluate(self.policy, self.ruleset, self.usage, payment, context)


def standing(session: Session, *, agent: Agent, now: datetime) -> Standing:
    policy = current_policy(session, agent)
    rules = rules_for_agent(session, agent, now=now)
    return Standing(policy, rules, usage_for(session, agent=agent, policy=policy, rules=rules, now=now))


def decide(session: Session, *, agent: Agent, facts: PurchaseFacts, now: datetime) -> Decision:
    """The policy's decision on this purchase now. Writes nothing."""
    return _judged(session, agent=agent, facts=facts, now=now).decision


@dataclass(frozen=True)
class _Judged:
    """A decision and what it was made from: read without the organisation's lock, then checked
    under it against what was written meanwhile (`_decided_under_lock`)."""

    standing: Standing
    context: Context
    decision: Decision
    alone: bool  # nothing could be written before the lock (the lock was held from the start)
    seen: int | None  # otherwise, the organisation's newest event when the reading began


def _judged(session: Session, *, agent: Agent, facts: PurchaseFacts, now: datetime) -> _Judged:
    alone = locked_from_the_start(session)
    seen = None if alone else head_seq(session, agent.org_id)
    context = context_for(session, agent=agent, host=facts.host, pay_to=facts.selection.pay_to)
    judged = standing(session, agent=agent, now=now)
    return _Judged(judged, context, judged.judge(facts.payment(), context), alone, seen)


def _admitted(
    session: Session, principal: Principal, *, agent: Agent, facts: PurchaseFacts
) -> PaymentIntent | None:
    """The intent already reserved under this purchase's key, if any; refused outright when the
    agent was disabled or its wallet rotated away since the call's token and wallet were read."""
    if disabled_now(session, agent):
        raise AgentDisabled()  # disabled since the call's token was checked: nothing is signed
    _refuse_retired_payer(session, agent, facts)
    return IntentRepository(session).find_by_key(principal, agent_id=agent.id, key=facts.idempotency_key)


def _written_meanwhile(session: Session, judged: _Judged, *, held: int | None, org_id: str) -> Written:
    """What the organisation's other transactions wrote between `judged`'s reading and the lock.

    Every write that changes a decision's inputs (a policy, rule, team, member, wallet or agent)
    appends an event in its own transaction, and the lock orders those events; payments append
    `payment.` events."""
    if judged.alone or (held is not None and held == judged.seen):  # the lock found the same head
        return "nothing"
    if judged.seen is None:  # the organisation's first event was still to come
        return "other"
    return written_since(session, org_id, judged.seen, besides=_PAYMENT_EVENTS)


def _decided_under_lock(
    session: Session, judged: _Judged, changed: Written, *, agent: Agent, facts: PurchaseFacts, now: datetime
) -> Decision:
    """The decision `judged` made without the lock, as it stands now that the lock is held: with
    nothing written meanwhile, as it was; with only payments (other reservations, outcomes), a
    denial stands (it pays nothing, and was true when read) and anything else is judged by the
    same policy and rules against the spend summed again now; with anything else, decided afresh."""
    if changed == "nothing":
        return judged.decision
    if changed == "other":
        return decide(session, agent=agent, facts=facts, now=now)
    if judged.decision.outcome == "deny":
        return judged.decision
    was = judged.standing
    usage = usage_for(session, agent=agent, policy=was.policy, rules=was.rules, now=now)
    context = judged.context
    if not context.pay_to_known:  # a payee once paid stays paid; one new may have been paid since
        known = IntentRepository(session).pay_to_known(org_id=agent.org_id, pay_to=facts.selection.pay_to)
        context = replace(context, pay_to_known=known)
    return evaluate(was.policy, was.ruleset, usage, facts.payment(), context)


_PAYMENT_EVENTS = "payment."  # what reservations and outcomes append: spend changes, nothing else


def terms_digest(offer: Offer) -> str:
    """The SHA-256 of an `accepts` entry as canonical JSON: the terms a payment agreed to."""
    return hashlib.sha256(canonical(offer.raw).encode()).hexdigest()


def _authorize(intent: PaymentIntent, *, facts: PurchaseFacts, now: datetime) -> None:
    if facts.wallet_mode is None:
        raise IllegalTransition(detail="an intent is authorised only with a wallet")
    intent.terms_sha256 = terms_digest(facts.selection.offer)  # the terms now paid
    valid_after, valid_before = validity_window(int(now.timestamp()), facts.selection.max_timeout_seconds)
    intent.payer = facts.payer
    intent.wallet_mode = facts.wallet_mode
    intent.valid_after = valid_after
    intent.valid_before = valid_before
    intent.authorized_at = now
    intent.updated_at = now


def _new_intent(
    agent: Agent, facts: PurchaseFacts, policy_version: int, record: dict[str, Any], now: datetime
) -> PaymentIntent:
    if facts.wallet_mode is None:
        raise IllegalTransition(detail="an intent is recorded only with a wallet")
    intent_id = new_id("intent")
    selection = facts.selection
    return PaymentIntent(
        id=intent_id,
        org_id=agent.org_id,
        agent_id=agent.id,
        idempotency_key=facts.idempotency_key,
        fingerprint=facts.fingerprint,
        status=IntentStatus.CREATED,
        origin=facts.origin,
        method=facts.method,
        host=facts.host,
        resource=facts.resource,
        path=facts.path,
        x402_version=facts.x402_version,
        network=selection.network,
        asset=selection.asset,
        pay_to=selection.pay_to,
        amount_atomic=selection.amount_atomic,
        payer=facts.payer,
        nonce=derive_nonce(intent_id),
        valid_after=0,
        valid_before=0,
        policy_version=policy_version,
        decision=record,
        wallet_mode=facts.wallet_mode,
        terms_sha256=terms_digest(selection.offer),
        created_at=now,
        authorized_at=None,
        updated_at=now,
    )


def _audit(
    session: Session,
    *,
    agent: Agent,
    type: str,
    actor: str,
    data: dict[str, Any],
    now: datetime,
    intent: PaymentIntent | None = None,
) -> None:
    audit(
        session,
        org_id=agent.org_id,
        type=type,
        actor=actor,
        agent_id=agent.id,
        subject_id=intent.id if intent else None,
        data=data,
        now=now,
    )


def draft_intent(agent: Agent, facts: PurchaseFacts, *, now: datetime) -> PaymentIntent:
    """An authorised intent not recorded anywhere yet, for a wallet to sign before the reservation:
    its id, nonce and validity window are fixed now. It counts, and its signature may leave, only
    once `reserve(..., signed=draft)` committed it; a denial or a hold discards it."""
    intent = _new_intent(agent, facts, 0, {}, now)
    transition(intent, IntentStatus.AUTHORIZED, now=now)
    _authorize(intent, facts=facts, now=now)
    return intent


def find_by_key(session: Session, principal: Principal, *, agent_id: str, key: str) -> PaymentIntent | None:
    return IntentRepository(session).find_by_key(principal, agent_id=agent_id, key=key)


def reserve(
    session: Session,
    principal: Principal,
    *,
    agent: Agent,
    facts: PurchaseFacts,
    now: datetime,
    signed: PaymentIntent | None = None,
) -> Reservation:
    """Decide and record: an authorised intent, a held one with its approval, or a denial. With
    `signed`, a draft its wallet already signed: allowed, that intent is recorded `submitted` (its
    signature leaves once this commits), with both audit events; otherwise it is discarded.

    The reading, checking and deciding happen before the organisation's lock; under it, only what
    was written meanwhile is read again (`_written_meanwhile`, `_decided_under_lock`), so
    reservations of one organisation wait for each other's writes, never for their decisions."""
    judged = _judged(session, agent=agent, facts=facts, now=now)
    intents = IntentRepository(session)
    existing = _admitted(session, principal, agent=agent, facts=facts)
    if existing is not None:
        return Reservation("existing", intent=existing)
    held = lock_org(session, agent.org_id)
    changed = _written_meanwhile(session, judged, held=held, org_id=agent.org_id)
    if changed != "nothing":  # what was checked before the lock is checked again
        existing = (
            _admitted(session, principal, agent=agent, facts=facts)
            if changed == "other"
            else intents.find_by_key(principal, agent_id=agent.id, key=facts.idempotency_key)
        )
        if existing is not None:
            return Reservation("existing", intent=existing)
    decision = _decided_under_lock(session, judged, changed, agent=agent, facts=facts, now=now)
    record = decision_record(decision, facts)
    base = {**record, "idempotencyKey": facts.idempotency_key, "origin": facts.origin}
    actor = principal.actor

    if decision.outcome == "deny":
        _audit(session, agent=agent, type="payment.denied", actor=actor, data=base, now=now)
        return Reservation("denied", decision=decision)

    if decision.outcome == "hold":
        full = approvals.queue_full(session, org_id=agent.org_id, agent_id=agent.id, now=now)
        if full is not None:
            data = {**base, "queueFull": True, **full}
            _audit(session, agent=agent, type="payment.denied", actor=actor, data=data, now=now)
            return Reservation("queue_full", decision=decision)
        intent = intents.add(_new_intent(agent, facts, decision.policy_version, record, now))
        reason = HoldReason(decision.hold_reason or HoldReason.THRESHOLD)
        approval = approvals.create(
            session,
            intent=intent,
            reason=reason,
            threshold_atomic=_threshold_atomic(decision, reason),
            decision_record=record,
            now=now,
        )
        data = {**base, "approvalId": approval.id, "expiresAt": approval.expires_at.isoformat()}
        _audit(session, agent=agent, type="payment.held", actor=actor, data=data, now=now, intent=intent)
        return Reservation("held", decision=decision, intent=intent, approval=approval)

    if signed is not None:
        allowed = _Allowed(decision, record, base)
        return _submit_signed(session, principal, agent=agent, intent=signed, allowed=allowed, now=now)
    intent = _new_intent(agent, facts, decision.policy_version, record, now)
    transition(intent, IntentStatus.AUTHORIZED, now=now)
    _authorize(intent, facts=facts, now=now)
    intents.add(intent)
    data = {**base, "nonce": intent.nonce}
    _audit(session, agent=agent, type="payment.authorized", actor=actor, data=data, now=now, intent=intent)
    return Reservation("authorized", decision=decision, intent=intent)


@dataclass(frozen=True)
class _Allowed:
    decision: Decision
    record: dict[str, Any]  # what the intent keeps of the decision
    base: dict[str, Any]  # what its audit events keep


def _submit_signed(
    session: Session,
    principal: Principal,
    *,
    agent: Agent,
    intent: PaymentIntent,
    allowed: _Allowed,
    now: datetime,
) -> Reservation:
    """The signed draft, allowed: recorded authorised and, at once, `submitted`, with both events.
    Its id, nonce and validity window are the ones signed; the decision is this one."""
    decision = allowed.decision
    intent.policy_version = decision.policy_version
    intent.decision = allowed.record
    intent.created_at = intent.authorized_at = now
    transition(intent, IntentStatus.SUBMITTED, now=now)
    intent.submitted_at = now
    IntentRepository(session).add(intent)
    data = {**allowed.base, "nonce": intent.nonce}
    actor = principal.actor
    _audit(session, agent=agent, type="payment.authorized", actor=actor, data=data, now=now, intent=intent)
    submitted = record_change(
        session, principal, intent, event="payment.submitted", data=_answer_data(intent), now=now
    )
    return Reservation("submitted", decision=decision, intent=submitted)


def _refuse_retired_payer(session: Session, agent: Agent, facts: PurchaseFacts) -> None:
    """The call read the agent's wallet before this lock; a rotation committed since then leaves
    it paying from a retired wallet, which signs nothing new (it may be swept meanwhile)."""
    if is_retired_payer(session, agent, facts.payer):
        raise WalletChanged()


def _threshold_atomic(decision: Decision, reason: HoldReason) -> int | None:
    """The threshold an approval shows: only when it is the approval's reason."""
    threshold = decision.threshold_usd
    return usd_to_atomic(threshold) if reason == HoldReason.THRESHOLD and threshold is not None else None


def authorize_held(
    session: Session,
    principal: Principal,
    *,
    agent: Agent,
    intent_id: str,
    facts: PurchaseFacts,
    now: datetime,
) -> Reservation:
    """The retry of an approved payment: decide again, then authorise the held intent once.

    The approval covers the payment a person saw (amount, payee, network, host, resource) and the
    hold reasons it was created for. A fresh decision that holds for a reason it does not cover (a
    hold rule added since, instructions that first appear now, a threshold that now applies) pays
    nothing: the payment waits for a new approval, and the old one can no longer pay.
    """
    lock_org(session, agent.org_id)
    intents = IntentRepository(session)
    intent = intents.get_readable(principal, intent_id)
    if intent is None:
        raise IllegalTransition(detail="unknown intent")
    intents.refresh(intent)
    approval = approvals.for_intent(session, principal, intent.id)
    if approval is None:
        raise IllegalTransition(detail="a held intent without its approval")
    if intent.status != IntentStatus.CREATED:
        if approval.status in (ApprovalStatus.DENIED, ApprovalStatus.EXPIRED):
            approvals.raise_if_closed(approval, now)
        return Reservation("existing", intent=intent)  # a concurrent retry got there first
    if approvals.effective_status(approval, now) != ApprovalStatus.APPROVED:
        approvals.raise_if_closed(approval, now)
        return Reservation("held", intent=intent, approval=approval)
    selection = facts.selection
    if (
        selection.amount_atomic != approval.amount_atomic
        or selection.pay_to.lower() != approval.pay_to.lower()
        or selection.network != approval.network
        or facts.host != approval.host
        or facts.resource != approval.resource
    ):
        raise ApprovalMismatch(approvalId=approval.id)
    _refuse_retired_payer(session, agent, facts)

    decision = decide(session, agent=agent, facts=facts, now=now)
    record = {**decision_record(decision, facts), "approvalId": approval.id}
    base = {**record, "idempotencyKey": facts.idempotency_key, "origin": facts.origin}
    actor = principal.actor
    if decision.outcome == "deny":
        # The approval stays usable until its retry window closes: a human may lift the limit.
        _audit(session, agent=agent, type="payment.denied", actor=actor, data=base, now=now, intent=intent)
        return Reservation("denied", decision=decision)

    if decision.outcome == "hold":
        uncovered = approvals.uncovered(approval, reasons=decision.hold_reasons, rules=decision.rules)
        if uncovered:
            return _hold_again(
                session,
                agent=agent,
                intent=intent,
                approval=approval,
                decision=decision,
                record=record,
                base=base,
                reason=HoldReason(uncovered[0]),
                actor=actor,
                now=now,
            )

    # Every hold that applies now was seen by the person who approved this very payment.
    record["coveredHold"] = decision.hold_reason
    record["coveredHolds"] = list(decision.hold_reasons)
    transition(intent, IntentStatus.AUTHORIZED, now=now)
    _authorize(intent, facts=facts, now=now)
    intent.policy_version = decision.policy_version
    intent.decision = record
    intent.origin = facts.origin
    session.add(intent)
    approvals.consume(approval, now=now)
    session.add(approval)
    session.flush()
    data = {
        **base,
        "coveredHold": decision.hold_reason,
        "coveredHolds": list(decision.hold_reasons),
        "nonce": intent.nonce,
    }
    _audit(session, agent=agent, type="payment.authorized", actor=actor, data=data, now=now, intent=intent)
    return Reservation("authorized", decision=decision, intent=intent, approval=approval)


def _hold_again(
    session: Session,
    *,
    agent: Agent,
    intent: PaymentIntent,
    approval: Approval,
    decision: Decision,
    record: dict[str, Any],
    base: dict[str, Any],
    reason: HoldReason,
    actor: str,
    now: datetime,
) -> Reservation:
    """A hold no person saw: the same held intent waits for a new approval, named by `reason`."""
    full = approvals.queue_full(session, org_id=agent.org_id, agent_id=agent.id, now=now)
    if full is not None:
        data = {**base, "queueFull": True, **full}
        _audit(session, agent=agent, type="payment.denied", actor=actor, data=data, now=now, intent=intent)
        return Reservation("queue_full", decision=decision)
    record = {key: value for key, value in record.items() if key != "approvalId"}
    fresh = approvals.supersede(
        session,
        approval,
        intent=intent,
        reason=reason,
        threshold_atomic=_threshold_atomic(decision, reason),
        decision_record=record,
        actor=actor,
        now=now,
    )
    intent.policy_version = decision.policy_version
    intent.decision = record
    intent.updated_at = now
    session.add(intent)
    data = {
        **base,
        "approvalId": fresh.id,
        "supersedes": approval.id,
        "reason": str(reason),
        "expiresAt": fresh.expires_at.isoformat(),
    }
    _audit(session, agent=agent, type="payment.held", actor=actor, data=data, now=now, intent=intent)
    return Reservation("held", decision=decision, intent=intent, approval=fresh)


def locked_intent(session: Session, principal: Principal, intent_id: str) -> PaymentIntent:
    """The intent `principal` may read, as it stands once its organisation's lock is held: every
    change to an intent is decided on this fresh copy, never on one read before the lock."""
    intents = IntentRepository(session)
    intent = intents.get_readable(principal, intent_id)
    if intent is None:
        raise IllegalTransition(detail="unknown intent")
    lock_org(session, intent.org_id)
    intents.refresh(intent)
    return intent


def update_intent(
    session: Session,
    principal: Principal,
    *,
    intent_id: str,
    to: IntentStatus,
    now: datetime,
    event: str,
    **fields: Any,
) -> PaymentIntent:
    """Move an intent to `to`, set fields, and audit it, under the organisation's lock.

    `settled` is final: when a concurrent check (a replay, the reconciler) already found the
    transfer on-chain, the seller's later answer is recorded without moving the intent back.
    """
    intent = locked_intent(session, principal, intent_id)
    settled_already = intent.status == IntentStatus.SETTLED and to in SETTLED_STAYS
    if intent.status != to and not settled_already:
        transition(intent, to, now=now)
    for name, value in fields.items():
        setattr(intent, name, value)
    return record_change(session, principal, intent, event=event, data=_answer_data(intent), now=now)


def _answer_data(intent: PaymentIntent) -> dict[str, Any]:
    """What an intent's change of state audits besides its status: the seller's answer so far."""
    return {"httpStatus": intent.seller_status, "txHash": intent.tx_hash}


def submit(
    session: Session, principal: Principal, *, agent: Agent, intent_id: str, now: datetime, **fields: Any
) -> PaymentIntent:
    """Record that the intent's signed authorization is about to leave (with `fields`), unless its
    agent was disabled since the payment was reserved: then the intent fails with `agent_disabled`
    and the caller sends nothing. Under the organisation's lock, as disabling is: a disabling commits
    either before this (and nothing is sent) or after it (the payment was already on its way)."""
    lock_org(session, agent.org_id)
    if disabled_now(session, agent):
        return update_intent(
            session,
            principal,
            intent_id=intent_id,
            to=IntentStatus.FAILED,
            now=now,
            event="payment.failed",
            failure_code=AgentDisabled.code,
        )
    return update_intent(
        session,
        principal,
        intent_id=intent_id,
        to=IntentStatus.SUBMITTED,
        now=now,
        event="payment.submitted",
        submitted_at=now,
        **fields,
    )


def record_change(
    session: Session,
    principal: Principal,
    intent: PaymentIntent,
    *,
    event: str,
    data: dict[str, Any],
    now: datetime,
) -> PaymentIntent:
    """Write an intent that was just changed, and its audit event: the status and failure code,
    with `data`, in the same transaction."""
    intent.updated_at = now
    session.add(intent)
    audit(
        session,
        org_id=intent.org_id,
        type=event,
        actor=principal.actor,
        agent_id=intent.agent_id,
        subject_id=intent.id,
        data={"status": str(intent.status), "failureCode": intent.failure_code, **data},
        now=now,
    )
    # The seller circuit breaker counts here, in the outcome's own transaction.
    count_outcome(session, intent, actor=principal.actor, now=now)
    return intent


def close_held(
    session: Session,
    principal: Principal,
    *,
    approval: Approval,
    to: IntentStatus,
    failure_code: str,
    now: datetime,
) -> None:
    """A held intent whose approval was denied or expired can never pay: close it."""
    intent = IntentRepository(session).get_readable(principal, approval.intent_id)
    if intent is not None and intent.status == IntentStatus.CREATED:
        transition(intent, to, now=now)
        intent.failure_code = failure_code
        session.add(intent)


def payments_page(
    session: Session,
    principal: Principal,
    only: PaymentFilter,
    *,
    after: tuple[datetime, str] | None,
    limit: int,
) -> list[PaymentIntent]:
    """One page of the principal's payments, newest first (see IntentRepository.page)."""
    return list(IntentRepository(session).page(principal, only, after=after, limit=limit))


def find_payment(session: Session, principal: Principal, intent_id: str) -> PaymentIntent:
    """One payment the principal may read, by id."""
    intent = IntentRepository(session).get_readable(principal, intent_id) if len(intent_id) <= 40 else None
    if intent is None:
        raise PaymentNotFound()
    return intent


def newest(
    session: Session, principal: Principal, *, agent_id: str, limit: int, status: IntentStatus | None
) -> list[PaymentIntent]:
    return list(IntentRepository(session).newest(principal, agent_id=agent_id, limit=limit, status=status))
