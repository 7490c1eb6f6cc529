"""The purchase flow behind fetch_paid: ask, decide, reserve, sign, send once, record.

Order matters and is the product's promise:
1. the host is checked against the policy before anything is sent;
2. a 402's challenge is read and one payable offer chosen, within the call's maxAmountUsd;
3. the policy decides and, if it allows, the payment is reserved against every cap atomically;
4. the wallet signs an EIP-3009 authorisation whose nonce is derived from the intent;
5. the signed request goes once to the URL that asked for it, never following a redirect;
6. the seller's answer is recorded; `settled` is set only from chain logs.
Any failure after signing leaves the intent in a state that keeps counting against the caps until
the authorisation can no longer settle, and is reported with the intent and idempotency key.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from decimal import Decimal

import anyio

from auth.principal import Principal
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.money import atomic_to_usd, format_usd
from server.models import Agent, PaymentIntent, Wallet
from server.payments import ledger
from server.payments.errors import (
    AmountExceedsMax,
    ApprovalRequired,
    HostNotAllowed,
    IdempotencyKeyReused,
    IntentNotReplayable,
    InvalidPaymentRequired,
    NoPayableEntry,
    PaymentInProgress,
    PaymentNotCompleted,
    PaymentOutcomeUnknown,
    PaymentRejectedBySeller,
    PolicyDenied,
    SigningFailed,
    WalletNotConfigured,
)
from server.payments.fingerprint import new_idempotency_key, request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.results import FreeOutcome, PaidOutcome, body_of, payment_fields
from server.policy.engine import host_allowed
from server.policy.model import Policy
from server.policy.service import current_policy
from server.sellers.client import REDIRECT_STATUSES, SellerClient, SellerRequest, SellerResponse
from server.sellers.errors import ResponseLost, SellerUnreachable
from server.settings import Settings
from server.signers.base import SignerError
from server.tenancy.service import find_agent
from server.wallets.service import active_wallet, signer_for
from server.x402.authorization import build_authorization, encode_payment_signature, typed_data
from server.x402.challenge import Challenge, ChallengeError, decode_payment_required
from server.x402.headers import PAYMENT_REQUIRED, PAYMENT_RESPONSE, PAYMENT_SIGNATURE
from server.x402.receipt import SettlementReceipt, decode_payment_response
from server.x402.selection import NoPayableEntry as NoOffer
from server.x402.selection import Selection, select_offer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentContext:
    agent: Agent
    policy: Policy
    wallet: Wallet | None


class PurchaseService:
    def __init__(
        self, *, db: Database, settings: Settings, sellers: SellerClient, chain: ChainService, clock: Clock
    ) -> None:
        self._db = db
        self._settings = settings
        self._sellers = sellers
        self._chain = chain
        self._clock = clock

    # -- reading ---------------------------------------------------------------------------

    def _load(self, principal: Principal) -> AgentContext:
        assert principal.agent_id is not None
        with self._db.read() as session:
            agent = find_agent(session, principal.agent_id, org_id=principal.org_id)
            return AgentContext(agent, current_policy(session, agent.id), active_wallet(session, agent.id))

    def _find_intent(self, agent_id: str, key: str) -> PaymentIntent | None:
        with self._db.read() as session:
            return ledger.find_by_key(session, agent_id=agent_id, key=key)

    # -- the flow --------------------------------------------------------------------------

    async def fetch_paid(self, principal: Principal, request: FetchPaidInput) -> FreeOutcome | PaidOutcome:
        deadline = anyio.current_time() + self._settings.fetch_timeout_ms / 1000
        context = await self._db.run(self._load, principal)
        if not host_allowed(context.policy, request.host):
            await self._db.run(self._audit_host_denied, principal, context.agent, request)
            raise HostNotAllowed(host=request.host)

        fingerprint = request_fingerprint(request)
        if request.idempotency_key is not None:
            existing = await self._db.run(self._find_intent, context.agent.id, request.idempotency_key)
            if existing is not None:
                return await self._resume(existing, fingerprint)
        key = request.idempotency_key or new_idempotency_key()

        first = await self._sellers.fetch_before_payment(
            SellerRequest(request.method, request.url, request.headers, request.body), deadline=deadline
        )
        if first.status != 402:
            return FreeOutcome(first.status, request.host, body_of(first), first.redirect_not_followed)

        challenge = self._read_challenge(first)
        selection = self._select(challenge, context.policy)
        self._check_max(selection.amount_atomic, request.max_amount_usd)
        if context.wallet is None:
            raise WalletNotConfigured()

        facts = ledger.PurchaseFacts(
            idempotency_key=key,
            fingerprint=fingerprint,
            method=request.method,
            host=request.host,
            path=request.path,
            resource=first.url.split("?", 1)[0],
            origin=request.origin,
            x402_version=challenge.x402_version,
            resource_host=challenge.resource_host,
            selection=selection,
            payer=context.wallet.address,
            wallet_mode=context.wallet.mode,
        )
        reservation = await self._db.run(self._reserve, principal, context.agent, facts)
        if reservation.existing is not None:
            return await self._resume(reservation.existing, fingerprint)
        decision = reservation.decision
        assert decision is not None
        if decision.outcome == "deny":
            raise PolicyDenied(reasons=list(decision.reasons), policyVersion=decision.policy_version)
        if decision.outcome == "hold":
            raise ApprovalRequired(reason=decision.hold_reason)
        assert reservation.intent is not None
        return await self._pay(
            principal, reservation.intent, context.wallet, challenge, selection, first, request
        )

    def _reserve(self, principal: Principal, agent: Agent, facts: ledger.PurchaseFacts) -> ledger.Reservation:
        with self._db.write() as session:
            return ledger.reserve(
                session, agent=agent, facts=facts, actor=principal.actor, now=self._clock.now()
            )

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

    def _read_challenge(self, response: SellerResponse) -> Challenge:
        header = response.headers.get(PAYMENT_REQUIRED)
        if not header:
            raise InvalidPaymentRequired()
        try:
            return decode_payment_required(header)
        except ChallengeError as exc:
            raise InvalidPaymentRequired() from exc

    def _select(self, challenge: Challenge, policy: Policy) -> Selection:
        try:
            return select_offer(
                challenge, usdc_by_network=self._settings.assets, preferred_networks=policy.networks
            )
        except NoOffer as exc:
            raise NoPayableEntry(reason=exc.reason) from exc

    @staticmethod
    def _check_max(amount_atomic: int, max_amount_usd: Decimal | None) -> None:
        if max_amount_usd is not None and atomic_to_usd(amount_atomic) > max_amount_usd:
            raise AmountExceedsMax(
                maxAmountUsd=format_usd(max_amount_usd), amountUsd=format_usd(amount_atomic, atomic=True)
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
            self._check_max(authorization.value, request.max_amount_usd)
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

        header = encode_payment_signature(challenge, selection, authorization, signature)
        intent = await self._db.run(
            self._update,
            principal,
            intent.id,
            "submitted",
            "payment.submitted",
            submitted_at=self._clock.now(),
        )
        paid_request = SellerRequest(
            request.method, first.url, {**request.headers, PAYMENT_SIGNATURE: header}, request.body
        )
        deadline = anyio.current_time() + self._settings.fetch_timeout_ms / 1000
        try:
            response = await self._sellers.send(paid_request, deadline=deadline, after_payment=True)
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
        except SellerUnreachable:
            # The connection never opened: the signature did not leave this process.
            await self._db.run(
                self._update,
                principal,
                intent.id,
                "failed",
                "payment.failed",
                failure_code="seller_unreachable",
            )
            raise
        return await self._record_answer(principal, intent, response)

    async def _record_answer(
        self, principal: Principal, intent: PaymentIntent, response: SellerResponse
    ) -> PaidOutcome:
        receipt = decode_payment_response(response.headers.get(PAYMENT_RESPONSE))
        now = self._clock.now()
        served = 200 <= response.status < 300 and not (receipt is not None and not receipt.success)
        if served:
            intent = await self._db.run(
                self._update,
                principal,
                intent.id,
                "settlement_pending",
                "payment.receipt",
                seller_status=response.status,
                tx_hash=receipt.transaction if receipt else None,
                completed_at=now,
            )
            intent = await self.verify_settlement(principal, intent)
            body = body_of(response)
            return PaidOutcome(intent, response.status, False, body, response.body_error)

        reason = _seller_reason(receipt, response)
        rejected = response.status == 402 or (receipt is not None and not receipt.success)
        code = "payment_rejected_by_seller" if rejected else "payment_not_completed"
        intent = await self._db.run(
            self._update,
            principal,
            intent.id,
            "failed",
            "payment.failed",
            seller_status=response.status,
            tx_hash=receipt.transaction if receipt else None,
            failure_code=code,
            seller_reason=reason[:500] if reason else None,
            completed_at=now,
        )
        fields = {"httpStatus": response.status, **payment_fields(intent)}
        if rejected:
            raise PaymentRejectedBySeller(seller_reason=reason, **fields)
        redirect = response.status in REDIRECT_STATUSES or response.redirect_not_followed
        raise PaymentNotCompleted(
            seller_reason=reason, redirectNotFollowed=True if redirect else None, **fields
        )

    async def verify_settlement(self, principal: Principal | None, intent: PaymentIntent) -> PaymentIntent:
        """Mark the intent settled if, and only if, the chain shows its transfer."""
        finding = await self._chain.find_settlement(intent)
        if finding is None or not finding.found:
            return intent
        actor = principal.actor if principal else "system:reconciler"
        if finding.settled:
            return await self._db.run(
                self._update_as,
                actor,
                intent.id,
                "settled",
                "payment.settled",
                tx_hash=finding.tx_hash,
                settled_at=self._clock.now(),
            )
        return await self._db.run(
            self._update_as,
            actor,
            intent.id,
            intent.status,
            "payment.settlement_mismatch",
            failure_code=f"settlement_mismatch_{finding.mismatch}",
        )

    # -- replays ---------------------------------------------------------------------------

    async def _resume(self, intent: PaymentIntent, fingerprint: str) -> PaidOutcome:
        if intent.fingerprint != fingerprint:
            raise IdempotencyKeyReused()
        if intent.status in ("submitted", "settlement_pending"):
            intent = await self.verify_settlement(None, intent)
        if intent.status in ("settled", "settlement_pending"):
            return PaidOutcome(intent, intent.seller_status, True, None)
        if intent.status in ("failed", "expired"):
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


def _seller_reason(receipt: SettlementReceipt | None, response: SellerResponse) -> str | None:
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
    return None
