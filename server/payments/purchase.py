"""The purchase flow behind fetch_paid: ask, decide, reserve, sign, send once, record.

Order matters and is the product's promise:
1. the host is checked against the policy before anything is sent;
2. a 402's challenge is read and one payable offer chosen, within the call's maxAmountUsd;
3. the policy decides and, if it allows, the payment is reserved against every cap atomically; a
   payment that passes every rule but needs a human is held (`pending_approval`) and signs nothing;
4. the wallet signs an EIP-3009 authorisation whose nonce is derived from the intent;
5. the signed request goes once to the URL that asked for it, never following a redirect;
6. the seller's answer is recorded; `settled` is set only from chain logs.
Any failure after signing leaves the intent in a state that keeps counting against the caps until
the authorisation can no longer settle, and is reported with the intent and idempotency key.
A retry with the key of a held payment pays only once a human approved it, after every check above
has run again.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import anyio
from sqlalchemy.exc import SQLAlchemyError

from auth.principal import Principal
from server.approvals.service import ApprovalQueueFull, approval_url, effective_status, for_intent
from server.catalog.service import listing_for
from server.chain.reconcile import SettlementChecker
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.errors import PaywardenError
from server.kit.money import atomic_to_usd, format_usd
from server.models import Agent, Approval, PaymentIntent, Wallet
from server.payments import ledger
from server.payments.errors import (
    AmountExceedsMax,
    ControlPlaneUnavailable,
    HostNotAllowed,
    IdempotencyKeyReused,
    InsufficientFunds,
    IntentNotReplayable,
    InvalidPaymentRequired,
    NoPayableEntry,
    PaymentInProgress,
    PaymentNotCompleted,
    PaymentOutcomeUnknown,
    PaymentRejectedBySeller,
    PolicyDenied,
    ResourceMismatch,
    SigningFailed,
    WalletNotConfigured,
)
from server.payments.fingerprint import new_idempotency_key, request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.results import FreeOutcome, PaidOutcome, PendingOutcome, body_of, payment_fields
from server.policy.engine import Decision, host_allowed
from server.policy.model import Policy
from server.policy.service import add_catalog_host, current_policy
from server.sellers.client import REDIRECT_STATUSES, SellerClient, SellerRequest, SellerResponse
from server.sellers.errors import ResponseLost, SellerTimeout
from server.settings import SUPPORTED_NETWORKS, Settings
from server.signers.base import SignerError
from server.tenancy.service import get_agent
from server.wallets.service import active_wallet, signer_for
from server.x402.authorization import build_authorization, payment_header, typed_data
from server.x402.challenge import Challenge, ChallengeError, decode_payment_required, decode_v1_body, host_of
from server.x402.headers import PAYMENT_REQUIRED, PAYMENT_RESPONSE, X_PAYMENT_RESPONSE
from server.x402.instructions import any_instructions, visible_text
from server.x402.receipt import SettlementReceipt, decode_payment_response
from server.x402.selection import NoPayableEntry as NoOffer
from server.x402.selection import Selection, select_offer

log = logging.getLogger(__name__)

# Below this much time left in the exchange (or a quarter of it, for short deadlines), a payment is
# not signed: its answer could hardly arrive in time.
MIN_SECONDS_FOR_PAID_REQUEST = 1.0
# How much of a 402's own body is read for instruction-like text.
MAX_CHALLENGE_TEXT_BYTES = 32 * 1024


MEMBER_CAP_HINT = (
    "The person this agent belongs to reached their daily sub-cap across all their agents, or has none "
    "yet. Do not retry today: a person asks an admin of the organisation to set or raise it."
)
RULE_HINT = (
    "A spending rule named in rules refused this payment. Only a person can change a rule; get_budget "
    "shows what each limit leaves and when it resets."
)


@dataclass(frozen=True)
class AgentContext:
    agent: Agent
    policy: Policy
    wallet: Wallet | None
    listed: bool  # the catalog lists the requested host


def denial_fields(decision: Decision) -> dict[str, Any]:
    """The extra fields of policy_denied: reasons, versions, the rules behind them and a hint."""
    fields: dict[str, Any] = {"reasons": list(decision.reasons), "policyVersion": decision.policy_version}
    if decision.rules:
        fields["rules"] = list(decision.rules)
        fields["ruleScopes"] = dict(decision.rule_scopes)
    if "member_cap_exceeded" in decision.reasons:
        fields["hint"] = MEMBER_CAP_HINT
    elif {"rule_denied", "rule_limit_exceeded"} & set(decision.reasons):
        fields["hint"] = RULE_HINT
    return fields


def read_challenge(response: SellerResponse) -> Challenge:
    """x402 v2 from the PAYMENT-REQUIRED header; without one, x402 v1 from the JSON body."""
    header = response.headers.get(PAYMENT_REQUIRED)
    try:
        if header:
            return decode_payment_required(header)
        return decode_v1_body(response.body)
    except ChallengeError as exc:
        raise InvalidPaymentRequired() from exc


def check_resource(host: str, challenge: Challenge, selection: Selection) -> str | None:
    """The host the challenge asks to be paid for; another host than the URL's is refused."""
    named = selection.offer.resource_url or challenge.resource_url
    if named is None:
        return None
    resource_host = host_of(named)
    if resource_host != host:
        raise ResourceMismatch()
    return resource_host


def choose_offer(challenge: Challenge, policy: Policy, settings: Settings) -> Selection:
    try:
        return select_offer(challenge, usdc_by_network=settings.assets, preferred_networks=policy.networks)
    except NoOffer as exc:
        raise NoPayableEntry(reason=exc.reason) from exc


def check_max(amount_atomic: int, max_amount_usd: Decimal | None) -> None:
    if max_amount_usd is not None and atomic_to_usd(amount_atomic) > max_amount_usd:
        raise AmountExceedsMax(
            maxAmountUsd=format_usd(max_amount_usd), amountUsd=format_usd(amount_atomic, atomic=True)
        )


@dataclass(frozen=True)
class Offered:
    """What a seller's 402 offers, read and checked the same way by fetch_paid and quote_payment."""

    challenge: Challenge
    selection: Selection
    resource_host: str | None
    instruction_like: bool


def read_offer(first: SellerResponse, request: FetchPaidInput, policy: Policy, settings: Settings) -> Offered:
    challenge = read_challenge(first)
    selection = choose_offer(challenge, policy, settings)
    check_max(selection.amount_atomic, request.max_amount_usd)
    resource_host = check_resource(request.host, challenge, selection)
    return Offered(challenge, selection, resource_host, instruction_like(challenge, first))


def purchase_facts(
    request: FetchPaidInput,
    first: SellerResponse,
    offered: Offered,
    *,
    key: str,
    fingerprint: str,
    payer: str,
    wallet_mode: str,
) -> ledger.PurchaseFacts:
    return ledger.PurchaseFacts(
        idempotency_key=key,
        fingerprint=fingerprint,
        method=request.method,
        host=request.host,
        path=request.path,
        resource=first.url.split("?", 1)[0],
        origin=request.origin,
        x402_version=offered.challenge.x402_version,
        resource_host=offered.resource_host,
        selection=offered.selection,
        payer=payer,
        wallet_mode=wallet_mode,
        instruction_like_description=offered.instruction_like,
    )


def load_context(db: Database, principal: Principal, host: str) -> AgentContext:
    assert principal.agent_id is not None
    with db.read() as session:
        agent = get_agent(session, principal, principal.agent_id)
        return AgentContext(
            agent,
            current_policy(session, agent.id),
            active_wallet(session, agent.id),
            listing_for(session, host) is not None,
        )


class PurchaseService:
    def __init__(
        self, *, db: Database, settings: Settings, sellers: SellerClient, chain: ChainService, clock: Clock
    ) -> None:
        self._db = db
        self._settings = settings
        self._sellers = sellers
        self._chain = chain
        self._clock = clock
        self._settlement = SettlementChecker(db=db, chain=chain, clock=clock)
        self._min_time_for_paid_request = min(MIN_SECONDS_FOR_PAID_REQUEST, settings.fetch_timeout_ms / 4000)

    # -- reading ---------------------------------------------------------------------------

    def _find_intent(self, agent_id: str, key: str) -> tuple[PaymentIntent | None, Approval | None]:
        with self._db.read() as session:
            intent = ledger.find_by_key(session, agent_id=agent_id, key=key)
            return intent, (for_intent(session, intent.id) if intent else None)

    def _approval_of(self, intent_id: str) -> Approval | None:
        with self._db.read() as session:
            return for_intent(session, intent_id)

    def _pending(self, intent: PaymentIntent, approval: Approval) -> PendingOutcome:
        return PendingOutcome(intent, approval, approval_url(self._settings.public_url, approval.id))

    # -- the flow --------------------------------------------------------------------------

    async def fetch_paid(
        self, principal: Principal, request: FetchPaidInput
    ) -> FreeOutcome | PaidOutcome | PendingOutcome:
        # One deadline for the whole exchange with the seller: the request, its redirects and the
        # paid request.
        deadline = anyio.current_time() + self._settings.fetch_timeout_ms / 1000
        try:
            context = await self._db.run(load_context, self._db, principal, request.host)
        except SQLAlchemyError as exc:
            log.exception("could not load the agent's policy")
            raise ControlPlaneUnavailable() from exc
        if not host_allowed(context.policy, request.host, listed=context.listed):
            await self._db.run(self._audit_host_denied, principal, context.agent, request)
            raise HostNotAllowed(host=request.host)

        fingerprint = request_fingerprint(request)
        held: PaymentIntent | None = None
        if request.idempotency_key is not None:
            existing, approval = await self._db.run(
                self._find_intent, context.agent.id, request.idempotency_key
            )
            if existing is not None:
                if existing.status != "created" or existing.fingerprint != fingerprint:
                    return await self._resume(existing, fingerprint)
                assert approval is not None
                if effective_status(approval, self._clock.now()) != "approved":
                    ledger.raise_for_approval(approval, self._clock.now())
                    return self._pending(existing, approval)
                held = existing  # approved: every check runs again below, then it pays once
        key = request.idempotency_key or new_idempotency_key()

        first = await self._sellers.fetch(
            SellerRequest(request.method, request.url, request.headers, request.body), deadline=deadline
        )
        if first.status != 402:
            return FreeOutcome(first.status, request.host, body_of(first), first.redirect_not_followed)

        offered = read_offer(first, request, context.policy, self._settings)
        challenge, selection = offered.challenge, offered.selection
        if context.wallet is None:
            raise WalletNotConfigured()
        await self._check_balance(principal, context.agent, context.wallet, selection)
        if deadline - anyio.current_time() < self._min_time_for_paid_request:
            raise SellerTimeout()

        facts = purchase_facts(
            request,
            first,
            offered,
            key=key,
            fingerprint=fingerprint,
            payer=context.wallet.address,
            wallet_mode=context.wallet.mode,
        )
        if held is not None:
            reservation = await self._db.run(self._authorize_held, principal, context.agent, held.id, facts)
        else:
            reservation = await self._db.run(self._reserve, principal, context.agent, facts)
        if reservation.kind == "existing":
            assert reservation.intent is not None
            return await self._resume(reservation.intent, fingerprint)
        if reservation.kind == "denied":
            assert reservation.decision is not None
            raise PolicyDenied(**denial_fields(reservation.decision))
        if reservation.kind == "queue_full":
            raise ApprovalQueueFull()
        assert reservation.intent is not None
        if reservation.kind == "held":
            assert reservation.approval is not None
            return self._pending(reservation.intent, reservation.approval)
        outcome = await self._pay(
            principal, reservation.intent, context.wallet, challenge, selection, first, request, deadline
        )
        if outcome.intent.decision.get("coveredHold") == "catalog_new_host":
            await self._db.run(self._add_catalog_host, principal, context.agent, request.host)
        return outcome

    def _reserve(self, principal: Principal, agent: Agent, facts: ledger.PurchaseFacts) -> ledger.Reservation:
        with self._db.write() as session:
            return ledger.reserve(
                session, agent=agent, facts=facts, actor=principal.actor, now=self._clock.now()
            )

    def _authorize_held(
        self, principal: Principal, agent: Agent, intent_id: str, facts: ledger.PurchaseFacts
    ) -> ledger.Reservation:
        with self._db.write() as session:
            return ledger.authorize_held(
                session,
                agent=agent,
                intent_id=intent_id,
                facts=facts,
                actor=principal.actor,
                now=self._clock.now(),
            )

    def _add_catalog_host(self, principal: Principal, agent: Agent, host: str) -> None:
        with self._db.write() as session:
            add_catalog_host(session, agent=agent, host=host, actor=principal.actor, now=self._clock.now())

    def _audit_host_denied(self, principal: Principal, agent: Agent, request: FetchPaidInput) -> None:
        from server.audit.service import record

        with self._db.write() as session:
            record(
                session,
                org_id=agent.org_id,
                type="payment.denied",
                actor=principal.actor,
                agent_id=agent.id,
                data={"reasons": ["host_not_allowed"], "host": request.host, "stage": "before_request"},
                now=self._clock.now(),
            )

    async def _check_balance(
        self, principal: Principal, agent: Agent, wallet: Wallet, selection: Selection
    ) -> None:
        """Advisory: with an RPC for the network, refuse before signing when the wallet cannot pay.

        The balance can change before the seller settles, and an RPC that does not answer skips
        the check; the seller's facilitator has the last word either way.
        """
        balance = await self._chain.balance(
            network=selection.network, asset=selection.asset, owner=wallet.address
        )
        if balance is None or balance >= selection.amount_atomic:
            return
        network_name = SUPPORTED_NETWORKS.get(selection.network, selection.network)
        have = format_usd(balance, atomic=True)
        need = format_usd(selection.amount_atomic, atomic=True)
        short = f"{wallet.address[:6]}…{wallet.address[-4:]}"
        await self._db.run(self._audit_insufficient, principal, agent, wallet, selection, have, need)
        raise InsufficientFunds(
            summary=(
                f"Wallet {short} holds {have} USDC on {network_name}, and this payment needs {need} USDC. "
                "Nothing was signed or paid."
            ),
            payer=wallet.address,
            network=selection.network,
            networkName=network_name,
            balanceUsdc=have,
            amountUsdc=need,
        )

    def _audit_insufficient(
        self, principal: Principal, agent: Agent, wallet: Wallet, selection: Selection, have: str, need: str
    ) -> None:
        from server.audit.service import record

        with self._db.write() as session:
            record(
                session,
                org_id=agent.org_id,
                type="payment.insufficient_funds",
                actor=principal.actor,
                agent_id=agent.id,
                data={
                    "payer": wallet.address,
                    "network": selection.network,
                    "balanceUsd": have,
                    "amountUsd": need,
                },
                now=self._clock.now(),
            )

    async def _pay(
        self,
        principal: Principal,
        intent: PaymentIntent,
        wallet: Wallet,
        challenge: Challenge,
        selection: Selection,
        first: SellerResponse,
        request: FetchPaidInput,
        deadline: float,
    ) -> PaidOutcome:
        try:
            signer = signer_for(wallet, self._settings.master)
            authorization = build_authorization(
                selection,
                payer=signer.address,
                intent_id=intent.id,
                valid_after=intent.valid_after,
                valid_before=intent.valid_before,
            )
            # Checked again against what is actually signed, not only against the offer.
            check_max(authorization.value, request.max_amount_usd)
            if authorization.value != intent.amount_atomic or authorization.nonce != intent.nonce:
                raise SignerError("the authorisation does not match the reserved intent")
            signature = await signer.sign_typed_data(typed_data(selection, authorization))
        except (SignerError, ValueError) as exc:
            await self._db.run(
                self._update, principal, intent.id, "failed", "payment.failed", failure_code="signing_failed"
            )
            log.warning("signing failed for %s: %s", intent.id, type(exc).__name__)
            raise SigningFailed() from exc
        except AmountExceedsMax:
            await self._db.run(
                self._update,
                principal,
                intent.id,
                "failed",
                "payment.failed",
                failure_code="amount_exceeds_max",
            )
            raise

        header_name, header_value = payment_header(challenge, selection, authorization, signature)
        intent = await self._db.run(
            self._update,
            principal,
            intent.id,
            "submitted",
            "payment.submitted",
            submitted_at=self._clock.now(),
        )
        paid_request = SellerRequest(
            request.method, first.url, {**request.headers, header_name: header_value}, request.body
        )
        try:
            # Once, to the URL that asked, at the address that asked: never a redirect, never a retry.
            response = await self._sellers.send(
                paid_request, deadline=deadline, after_payment=True, pin=first.peer
            )
        except ResponseLost as exc:
            await self._db.run(
                self._update,
                principal,
                intent.id,
                "submitted",
                "payment.outcome_unknown",
                failure_code="answer_lost",
            )
            raise PaymentOutcomeUnknown(intentId=intent.id, idempotencyKey=intent.idempotency_key) from exc
        except PaywardenError as exc:
            # Refused before a byte was written (unreachable, blocked, out of time): the signed
            # authorisation never left this process, so it can never move money.
            await self._db.run(
                self._update, principal, intent.id, "failed", "payment.failed", failure_code=exc.code
            )
            raise
        return await self._record_answer(principal, intent, response, challenge)

    async def _record_answer(
        self, principal: Principal, intent: PaymentIntent, response: SellerResponse, challenge: Challenge
    ) -> PaidOutcome:
        receipt = _receipt(response, challenge)
        claimed = receipt.transaction if receipt else None
        now = self._clock.now()
        served = 200 <= response.status < 300 and not (receipt is not None and not receipt.success)
        if served:
            try:
                intent = await self._db.run(
                    self._update,
                    principal,
                    intent.id,
                    "settlement_pending",
                    "payment.receipt",
                    seller_status=response.status,
                    seller_tx_hash=claimed,
                    completed_at=now,
                )
            except SQLAlchemyError:
                # The seller served and was paid; only our record of it failed. Say so, no more.
                log.exception("could not record the receipt of intent %s", intent.id)
                return PaidOutcome(
                    intent, response.status, False, body_of(response), response.body_error, "unknown"
                )
            intent = await self.verify_settlement(principal, intent)
            return PaidOutcome(intent, response.status, False, body_of(response), response.body_error)

        reason = _seller_reason(receipt, response)
        rejected = response.status == 402 or (receipt is not None and not receipt.success)
        code = "payment_rejected_by_seller" if rejected else "payment_not_completed"
        try:
            intent = await self._db.run(
                self._update,
                principal,
                intent.id,
                "failed",
                "payment.failed",
                seller_status=response.status,
                seller_tx_hash=claimed,
                failure_code=code,
                seller_reason=reason[:500] if reason else None,
                completed_at=now,
            )
        except SQLAlchemyError:
            log.exception("could not record the failed receipt of intent %s", intent.id)
        fields = {"httpStatus": response.status, **payment_fields(intent)}
        if rejected:
            raise PaymentRejectedBySeller(seller_reason=reason, **fields)
        redirect = response.status in REDIRECT_STATUSES or response.redirect_not_followed
        raise PaymentNotCompleted(
            seller_reason=reason, redirectNotFollowed=True if redirect else None, **fields
        )

    async def verify_settlement(self, principal: Principal | None, intent: PaymentIntent) -> PaymentIntent:
        """Mark the intent settled if, and only if, the chain shows its transfer."""
        actor = principal.actor if principal else "system:reconciler"
        return await self._settlement.check(intent, actor=actor)

    # -- replays ---------------------------------------------------------------------------

    async def _resume(self, intent: PaymentIntent, fingerprint: str) -> PaidOutcome | PendingOutcome:
        """The key already names a purchase: answer for it, never pay it again."""
        if intent.fingerprint != fingerprint:
            raise IdempotencyKeyReused()
        if intent.status == "created":
            approval = await self._db.run(self._approval_of, intent.id)
            assert approval is not None
            if effective_status(approval, self._clock.now()) != "approved":
                ledger.raise_for_approval(approval, self._clock.now())
            return self._pending(intent, approval)
        if intent.status in ("submitted", "settlement_pending", "failed"):
            # A seller may settle after answering badly: the chain, not the answer, decides.
            intent = await self.verify_settlement(None, intent)
        if intent.status in ("settled", "settlement_pending"):
            return PaidOutcome(intent, intent.seller_status, True, None)
        if intent.status in ("failed", "expired"):
            approval = await self._db.run(self._approval_of, intent.id)
            if approval is not None:
                ledger.raise_for_approval(approval, self._clock.now())
            raise IntentNotReplayable(intentId=intent.id, idempotencyKey=intent.idempotency_key)
        raise PaymentInProgress(intentId=intent.id, idempotencyKey=intent.idempotency_key)

    # -- writes ----------------------------------------------------------------------------

    def _update(
        self, principal: Principal, intent_id: str, to: str, event: str, **fields: object
    ) -> PaymentIntent:
        return self._update_as(principal.actor, intent_id, to, event, **fields)

    def _update_as(self, actor: str, intent_id: str, to: str, event: str, **fields: object) -> PaymentIntent:
        with self._db.write() as session:
            return ledger.update_intent(
                session, intent_id=intent_id, to=to, actor=actor, now=self._clock.now(), event=event, **fields
            )


def _receipt(response: SellerResponse, challenge: Challenge) -> SettlementReceipt | None:
    """The seller's settlement answer, from the header of the challenge's protocol version."""
    names = (X_PAYMENT_RESPONSE, PAYMENT_RESPONSE) if challenge.x402_version == 1 else (PAYMENT_RESPONSE,)
    for name in names:
        receipt = decode_payment_response(response.headers.get(name))
        if receipt is not None:
            return receipt
    return None


def instruction_like(challenge: Challenge, response: SellerResponse) -> bool:
    """Whether the 402's own words (its description, error and body) read like orders to an agent."""
    return any_instructions([*challenge.seller_texts(), _body_text(response)])


def _body_text(response: SellerResponse) -> str:
    """The 402's own body as text a reader would see (an HTML paywall's scripts are not text)."""
    text = response.body[:MAX_CHALLENGE_TEXT_BYTES].decode("utf-8", errors="ignore")
    return visible_text(text, response.content_type)


def _seller_reason(receipt: SettlementReceipt | None, response: SellerResponse) -> str | None:
    """The seller's own explanation: untrusted text, only ever shown fenced."""
    if receipt is not None and receipt.error_reason:
        return receipt.error_reason
    header = response.headers.get(PAYMENT_REQUIRED)
    if header:
        try:
            error = decode_payment_required(header).error
        except ChallengeError:
            error = None
        if error:
            return error[:500]
    return _json_error(response)


def _json_error(response: SellerResponse) -> str | None:
    if "json" not in response.content_type.lower() or len(response.body) > MAX_CHALLENGE_TEXT_BYTES:
        return None
    try:
        document = json.loads(response.body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(document, dict):
        return None
    for key in ("error", "errorReason", "errorMessage", "message", "detail", "reason"):
        value = document.get(key)
        if isinstance(value, str) and value:
            return value[:500]
        if isinstance(value, dict) and isinstance(value.get("message"), str) and value["message"]:
            return str(value["message"])[:500]
    return None
