"""pay_x402: a payment signed under the agent's policy and handed to the agent, whose own HTTP
client sends it; and report_receipt, the seller's answer the agent hands back.

The agent sends what it says the seller's 402 was, but Paywarden trusts nothing it can check
itself: it runs fetch_paid's preflight, requesting the URL again (the agent's method, headers and
body) through the guarded seller client, and the offer step also requires the agent's copy to
name the same terms as the 402 it got (`challenge_mismatch` otherwise: nothing is reserved or
signed). Then the same decision, reservation, holds and approvals as fetch_paid. On allow the
wallet signs, the payment is recorded `submitted` with the header handed over (sealed, so a
replay with the same key hands over the same header and nothing is signed again), and the header
goes back to the agent. Paywarden never sees the seller's answer: settlement comes only from the
chain (the authorisation's nonce, found by the settlement checks and the reconciler), and a
`PAYMENT-RESPONSE` the agent reports is kept as received, a claim that only says where to look.
"""

from __future__ import annotations

from functools import partial

from sqlmodel import Session

from auth.principal import Principal
from server.audit.service import record as audit
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.models import Agent, PaymentIntent
from server.payments import ledger
from server.payments.answer import MAX_PAYMENT_RESPONSE_CHARS
from server.payments.errors import (
    NEVER_SENT_FAILURES,
    ChallengeMismatch,
    PaymentNotFound,
    ReceiptNotAccepted,
)
from server.payments.fingerprint import handover_fingerprint, new_idempotency_key
from server.payments.inputs import FetchPaidInput, PayX402Input, ReceiptReport
from server.payments.purchase import Call, PurchaseService
from server.payments.results import PendingOutcome, SignedOutcome
from server.vocabulary import IntentStatus, PaymentSender
from server.wallets.sealed import payment_header_context
from server.x402.challenge import Challenge
from server.x402.matching import Mismatch, mismatch
from server.x402.payment_identifier import carried_identifier, declaration, payment_identifier
from server.x402.receipt import decode_payment_response
from server.x402.selection import Selection
from server.x402.transfer_authorization import payment_header, payment_header_name

# A handed-over header answers a replay once the payment left: what the agent holds is this one.
HANDED_OVER = (IntentStatus.SUBMITTED, IntentStatus.SETTLEMENT_PENDING, IntentStatus.SETTLED)


def check_claimed(claimed: Challenge, fetched: Challenge, selection: Selection) -> None:
    """The offer step's extra check: the agent's copy names the terms of the 402 Paywarden got."""
    found = mismatch(claimed, fetched, selection.offer)
    if found is not None:
        raise ChallengeMismatch(mismatch=str(found))


class HandOverService:
    def __init__(self, *, db: Database, master: MasterKey, purchases: PurchaseService, clock: Clock) -> None:
        self._db = db
        self._master = master
        self._purchases = purchases
        self._clock = clock

    async def pay_x402(self, principal: Principal, given: PayX402Input) -> SignedOutcome | PendingOutcome:
        request = given.request
        call: Call[SignedOutcome] = Call(
            key=request.idempotency_key or new_idempotency_key(),
            fingerprint=handover_fingerprint(request),
            completed=self._handed_over,
        )
        try:
            passage = await self._purchases.reserve(
                principal, request, call, offer_check=partial(check_claimed, given.claimed)
            )
        except ChallengeMismatch as differs:
            if call.agent is not None:
                await self._db.writing(self._audit_mismatch, principal, call.agent, request, differs)
            raise
        if call.answer is not None:
            return call.answer
        first, context = passage.first, passage.context
        assert first is not None
        assert context is not None
        if first.status != 402:
            none = ChallengeMismatch(mismatch=str(Mismatch.NO_CHALLENGE), httpStatus=first.status)
            await self._db.writing(self._audit_mismatch, principal, context.agent, request, none)
            raise none
        intent = await self._purchases.reserved(principal, call)
        if not isinstance(intent, PaymentIntent):
            return intent
        wallet, offered = context.wallet, passage.offered
        assert wallet is not None
        assert offered is not None
        signed = await self._purchases.sign(
            principal, intent, wallet, offered.selection, request.max_amount_usd
        )
        identifier = payment_identifier(intent.id) if declaration(offered.challenge) is not None else None
        name, value = payment_header(
            offered.challenge,
            offered.selection,
            signed.authorization,
            signed.signature,
            identifier=identifier,
        )
        # Recorded as sent before the header leaves: from now on only the chain says what became of it.
        intent = await self._purchases.submit(
            principal,
            context.agent,
            intent.id,
            wallet=wallet,
            selection=offered.selection,
            sealed_with=self._master.key_id,
            sent_by=PaymentSender.AGENT,
            payment_header_sealed=self._master.seal(
                value.encode(), context=payment_header_context(intent.id)
            ),
            payment_header_key_id=self._master.key_id,
        )
        await self._purchases.after_authorized(principal, context.agent, intent, request.host)
        return SignedOutcome(intent, name, value, False, identifier)

    def _handed_over(self, intent: PaymentIntent) -> SignedOutcome | None:
        """A replay's answer: the very header handed over before, never a new signature."""
        if intent.status not in HANDED_OVER or intent.payment_header_sealed is None:
            return None
        sealed = bytes(intent.payment_header_sealed)
        value = self._master.open(sealed, context=payment_header_context(intent.id)).decode()
        return SignedOutcome(
            intent, payment_header_name(intent.x402_version), value, True, carried_identifier(value)
        )

    def _audit_mismatch(
        self,
        session: Session,
        principal: Principal,
        agent: Agent,
        request: FetchPaidInput,
        refused: ChallengeMismatch,
    ) -> None:
        audit(
            session,
            org_id=agent.org_id,
            type="payment.challenge_mismatch",
            actor=principal.actor,
            agent_id=agent.id,
            data={"host": request.host, "path": request.path, **refused.extra},
            now=self._clock.now(),
        )

    # -- report_receipt ------------------------------------------------------------------------

    async def report_receipt(self, principal: Principal, report: ReceiptReport) -> PaymentIntent:
        """Keep the seller's settlement header the agent got for a payment it sent itself, as
        received; then one look at the chain, which alone settles it."""
        intent = await self._db.writing(self._record_receipt, principal, report)
        return await self._purchases.verify_settlement(principal, intent)

    def _record_receipt(self, session: Session, principal: Principal, report: ReceiptReport) -> PaymentIntent:
        if report.intent_id is not None:
            found = ledger.find_payment(session, principal, report.intent_id)
        else:
            assert principal.agent_id is not None
            assert report.idempotency_key is not None
            key_found = ledger.find_by_key(
                session, principal, agent_id=principal.agent_id, key=report.idempotency_key
            )
            if key_found is None:
                raise PaymentNotFound()
            found = key_found
        intent = ledger.locked_intent(session, principal, found.id)
        if (
            intent.sent_by != PaymentSender.AGENT
            or intent.status in (IntentStatus.CREATED, IntentStatus.AUTHORIZED)
            or intent.failure_code in NEVER_SENT_FAILURES
        ):
            raise ReceiptNotAccepted(intentId=intent.id)
        claim = decode_payment_response(report.payment_response)
        intent.payment_response = report.payment_response[:MAX_PAYMENT_RESPONSE_CHARS]
        if claim is not None and claim.transaction is not None:
            intent.seller_tx_hash = claim.transaction  # where to look first on-chain, nothing more
        # What the agent says the seller claimed (a transaction hash is public, not a secret).
        claimed = {"claim": {"success": claim.success, "txHash": claim.transaction} if claim else None}
        return ledger.record_change(
            session, principal, intent, event="payment.receipt_reported", data=claimed, now=self._clock.now()
        )
