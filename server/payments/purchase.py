"""The purchase flow behind fetch_paid: ask, decide, reserve, sign, send once, record.

Order matters and is the product's promise (steps 1 to 3 are the preflight, preflight.py, which
quote_payment and diagnose_payment run too):
1. the host is checked against the policy before anything is sent, and every request, the first
   and each same-origin redirect, is judged by the policy before it is sent (location.py);
2. a 402's challenge is read and one payable offer chosen, within the call's maxAmountUsd; the
   canonical path that answered it is what the policy judges, the ledger counts and records;
3. the policy decides and, if it allows, the payment is reserved against every cap atomically; a
   payment that passes every rule but needs a human is held (`pending_approval`) and signs nothing;
4. the wallet signs an EIP-3009 authorisation whose nonce is derived from the intent;
5. the signed request goes once to the URL that asked for it (its method, headers and body as
   sent), never following a redirect;
6. the seller's answer is recorded; `settled` is set only from chain logs.
Any failure after signing leaves the intent in a state that keeps counting against the caps until
the authorisation can no longer settle, and is reported with the intent and idempotency key.
A retry with the key of a held payment pays only once a human approved it, after every check above
has run again, and only if the approval covers every hold reason that applies now.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Generic, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from auth.principal import Principal
from server.approvals import service as approvals
from server.approvals.errors import ApprovalQueueFull
from server.audit.service import record as audit
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.errors import PaywardenError
from server.kit.stopping import Stopping, calls_grace_seconds
from server.models import Agent, Approval, PaymentIntent, Wallet
from server.payments import ledger
from server.payments.answer import kept_of, receipt_of, seller_reason
from server.payments.errors import (
    AgentDisabled,
    AmountExceedsMax,
    IdempotencyKeyReused,
    InsufficientFunds,
    IntentNotReplayable,
    PaymentIdentifierConflict,
    PaymentInProgress,
    PaymentNotCompleted,
    PaymentOutcomeUnknown,
    PaymentRejectedBySeller,
    SigningFailed,
)
from server.payments.fingerprint import new_idempotency_key, request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.location import LocationDenied
from server.payments.offer import check_max
from server.payments.preflight.pipeline import AgentContext, Passage, Plan, Preflight, Step
from server.payments.results import (
    FreeOutcome,
    PaidOutcome,
    PendingOutcome,
    ReceiptState,
    after_payment_fields,
    body_of,
)
from server.payments.settlement.checks import SettlementChecker
from server.policy.engine import Decision
from server.policy.model import Policy
from server.policy.service import add_catalog_host
from server.sellers.client import REDIRECT_STATUSES, SellerClient, SellerRequest, SellerResponse
from server.sellers.errors import ResponseLost
from server.settings import Settings
from server.signers.cdp_api import CdpClientPool
from server.signers.errors import CdpError, CdpPolicyRefused, SignerError, SignRefused
from server.signers.intents import SignedTransfer
from server.vocabulary import ApprovalStatus, HoldReason, IntentStatus, WalletMode
from server.wallets.cdp import record_cdp_policy_refusal, sealed_cdp_credentials
from server.wallets.master_key import require_current_key
from server.wallets.service import (
    CdpAccess,
    intent_to_sign,
    record_sign_refused,
    signer_for,
    transfer_request,
)
from server.x402.challenge import Challenge
from server.x402.payment_identifier import CONFLICT_STATUS, declaration, payment_identifier
from server.x402.selection import Selection
from server.x402.transfer_authorization import payment_header

log = logging.getLogger(__name__)

# Below this much time left in the exchange (or a quarter of it, for short deadlines), a payment is
# not signed: its answer could hardly arrive in time.
MIN_SECONDS_FOR_PAID_REQUEST = 1.0


R = TypeVar("R")


@dataclass
class Call(Generic[R]):
    """What one paid call (fetch_paid, pay_x402) learns besides the preflight's passage."""

    key: str
    fingerprint: str
    # How the call answers for a key whose purchase went through (None: it did not, or not yet).
    completed: Callable[[PaymentIntent], R | None]
    agent: Agent | None = None
    wallet: Wallet | None = None
    answer: R | PendingOutcome | None = None  # the key already answers the call
    held: PaymentIntent | None = None  # an approved held payment, to authorise after every check
    reservation: ledger.Reservation | None = None
    # fetch_paid: a wallet whose key is in memory signs before the reservation, which then records
    # the payment `submitted` in the same transaction (`signed`: that signature, once it may leave).
    sign_ahead_within: Decimal | None = None
    signs_ahead: bool = False
    signed: SignedTransfer | None = None


class PurchaseService:
    def __init__(
        self,
        *,
        db: Database,
        settings: Settings,
        sellers: SellerClient,
        chain: ChainService,
        clock: Clock,
        stopping: Stopping | None = None,
        cdp_clients: CdpClientPool | None = None,
    ) -> None:
        self._db = db
        self._stopping = stopping or Stopping()
        self._cdp_clients = cdp_clients  # open clients of `cdp` wallets' organisations
        # Once the process is stopping, how long a paid request may still wait for the seller's
        # answer: what the grace period leaves calls, less a second to record it and answer.
        self._answer_after_stop_s = max(calls_grace_seconds(settings.shutdown_grace_seconds) - 1.0, 0.5)
        self._settings = settings
        self._sellers = sellers
        self._chain = chain
        self._clock = clock
        self._settlement = SettlementChecker(db=db, chain=chain, clock=clock)
        self._preflight = Preflight(
            sellers=sellers, assets=settings.assets, timeout_ms=settings.fetch_timeout_ms, clock=clock, db=db
        )
        self._follow_ups: set[asyncio.Task[PaymentIntent]] = set()
        self._min_time_for_paid_request = min(MIN_SECONDS_FOR_PAID_REQUEST, settings.fetch_timeout_ms / 4000)

    # -- reading ---------------------------------------------------------------------------

    def _find_intent(
        self, session: Session, principal: Principal, agent_id: str, key: str
    ) -> tuple[PaymentIntent | None, Approval | None]:
        intent = ledger.find_by_key(session, principal, agent_id=agent_id, key=key)
        return intent, (approvals.for_intent(session, principal, intent.id) if intent else None)

    def _approval_of(self, session: Session, principal: Principal, intent_id: str) -> Approval | None:
        return approvals.for_intent(session, principal, intent_id)

    def _pending(self, intent: PaymentIntent, approval: Approval) -> PendingOutcome:
        return PendingOutcome(
            intent, approval, approvals.approval_url(self._settings.public_url, approval.id)
        )

    # -- the flow --------------------------------------------------------------------------

    async def fetch_paid(
        self, principal: Principal, request: FetchPaidInput
    ) -> FreeOutcome | PaidOutcome | PendingOutcome:
        call = Call(
            key=request.idempotency_key or new_idempotency_key(),
            fingerprint=request_fingerprint(request),
            completed=self._paid_replay,
            signs_ahead=True,
            sign_ahead_within=request.max_amount_usd,
        )
        passage = await self.reserve(principal, request, call)
        if call.answer is not None:
            return call.answer
        first, context = passage.first, passage.context
        assert first is not None
        assert context is not None
        if first.status != 402:
            return FreeOutcome(first.status, request.host, body_of(first), first.redirect_not_followed)
        intent = await self.reserved(principal, call)
        if not isinstance(intent, PaymentIntent):
            return intent
        assert context.wallet is not None
        assert passage.offered is not None
        offered = passage.offered
        outcome = await self._pay(
            principal,
            context.agent,
            intent,
            context.wallet,
            offered.challenge,
            offered.selection,
            first,
            request,
            passage.deadline,
            signed=call.signed,
        )
        await self.after_authorized(principal, context.agent, outcome.intent, request.host)
        return outcome

    async def reserve(
        self,
        principal: Principal,
        request: FetchPaidInput,
        call: Call[R],
        *,
        offer_check: Callable[[Challenge, Selection], None] | None = None,
    ) -> Passage:
        """The preflight, whose decision reserves the payment against every cap; the key's earlier
        purchase answers instead (`call.answer`) when it has one. Raises the failed step's error."""

        async def before_request(context: AgentContext) -> bool:
            call.agent, call.wallet = context.agent, context.wallet
            if request.idempotency_key is not None:
                call.answer = await self._replay(principal, context.agent, request.idempotency_key, call)
                if call.answer is not None:
                    return True
            if context.wallet is not None:
                self._prefetch_balances(context.policy, context.wallet)
            return False

        async def decide(facts: ledger.PurchaseFacts) -> Decision | None:
            # The decision and the reservation against every cap are one transaction.
            assert call.agent is not None
            if call.held is not None:
                call.reservation = await self._db.writing(
                    self._authorize_held, principal, call.agent, call.held.id, facts
                )
            elif (ahead := await self._sign_ahead(call, facts)) is not None:
                draft, signed = ahead
                call.reservation = await self._db.run(
                    self._reserve_signed, principal, call.agent, facts, draft
                )
                if call.reservation.kind == "submitted":
                    call.signed = signed  # otherwise discarded: it never left this process
            else:
                call.reservation = await self._db.writing(self._reserve, principal, call.agent, facts)
            return call.reservation.decision

        plan = Plan(
            principal=principal,
            read_balance=self._balance_of,
            decide=decide,
            before_request=before_request,
            key=call.key,
            fingerprint=call.fingerprint,
            min_seconds_to_pay=self._min_time_for_paid_request,
            counts_decision=True,
            offer_check=offer_check,
        )
        passage = await self._preflight.run(request, plan)
        if call.answer is None and passage.error is not None:
            await self._audit_failed_step(principal, request, passage)
            raise passage.error
        return passage

    async def reserved(self, principal: Principal, call: Call[R]) -> PaymentIntent | R | PendingOutcome:
        """The intent the reservation authorised, to sign; or, when it authorised none, the call's
        answer (the key's earlier purchase, or its hold)."""
        reservation = call.reservation
        assert reservation is not None
        if reservation.kind == "existing":
            assert reservation.intent is not None
            return await self.resume(principal, reservation.intent, call)
        if reservation.kind == "queue_full":
            raise ApprovalQueueFull()
        assert reservation.intent is not None
        if reservation.kind == "held":
            assert reservation.approval is not None
            return self._pending(reservation.intent, reservation.approval)
        return reservation.intent

    async def _sign_ahead(
        self, call: Call[R], facts: ledger.PurchaseFacts
    ) -> tuple[PaymentIntent, SignedTransfer] | None:
        """A wallet whose key is in memory signs the payment before it is reserved: the signature
        stays in this process until the reservation commits, so the call takes one transaction
        before it leaves instead of two. None when the wallet signs elsewhere (CDP sees what it
        signs), or signing fails: then the reservation comes first, and signing after it records why."""
        agent, wallet = call.agent, call.wallet
        if not call.signs_ahead or agent is None or wallet is None or wallet.mode != WalletMode.LOCAL_KEY:
            return None
        draft = ledger.draft_intent(agent, facts, now=self._clock.now())
        try:
            check_max(draft.amount_atomic, call.sign_ahead_within)
            signer = signer_for(
                wallet, self._settings.master, usdc_by_network=self._settings.assets, clock=self._clock
            )
            signed = await signer.sign_payment(intent_to_sign(draft), transfer_request(facts.selection))
        except (PaywardenError, SignerError, ValueError):
            return None
        return draft, signed

    async def after_authorized(
        self, principal: Principal, agent: Agent, intent: PaymentIntent, host: str
    ) -> None:
        """A host first paid through the catalog, with a person's approval, is allowed from now on."""
        if HoldReason.CATALOG_NEW_HOST in intent.decision.get("coveredHolds", ()):
            await self._db.writing(self._add_catalog_host, principal, agent, host)

    async def _replay(
        self, principal: Principal, agent: Agent, key: str, call: Call[R]
    ) -> R | PendingOutcome | None:
        """The answer for a key that already names a purchase, if there is one before paying again;
        an approved held payment is kept in `call.held`: every check runs again, then it pays once."""
        existing, approval = await self._db.reading(self._find_intent, principal, agent.id, key)
        if existing is None:
            return None
        if existing.status != IntentStatus.CREATED or existing.fingerprint != call.fingerprint:
            return await self.resume(principal, existing, call)
        assert approval is not None
        if approvals.effective_status(approval, self._clock.now()) != ApprovalStatus.APPROVED:
            approvals.raise_if_closed(approval, self._clock.now())
            return self._pending(existing, approval)
        call.held = existing
        return None

    async def _audit_failed_step(
        self, principal: Principal, request: FetchPaidInput, passage: Passage
    ) -> None:
        """What the audit keeps of a payment refused before anything was signed."""
        context = passage.context
        if context is None:
            return
        if passage.failed == Step.HOST:
            await self._db.writing(self._audit_host_denied, principal, context.agent, request)
        elif passage.denied is not None:
            await self._db.run(self._audit_denied_before_request, principal, context.agent, passage.denied)
        elif isinstance(passage.error, InsufficientFunds):
            assert context.wallet is not None
            assert passage.selection is not None
            await self._db.writing(
                self._audit_insufficient,
                principal,
                context.agent,
                context.wallet,
                passage.selection,
                passage.error,
            )

    def _reserve(
        self, session: Session, principal: Principal, agent: Agent, facts: ledger.PurchaseFacts
    ) -> ledger.Reservation:
        return ledger.reserve(session, principal, agent=agent, facts=facts, now=self._clock.now())

    def _reserve_signed(
        self, principal: Principal, agent: Agent, facts: ledger.PurchaseFacts, draft: PaymentIntent
    ) -> ledger.Reservation:
        # Durable: were this commit lost to a power cut, the caps would forget a payment the seller
        # can still settle (see `_update`).
        with self._db.write(durable=True) as session:
            return ledger.reserve(
                session, principal, agent=agent, facts=facts, now=self._clock.now(), signed=draft
            )

    def _authorize_held(
        self,
        session: Session,
        principal: Principal,
        agent: Agent,
        intent_id: str,
        facts: ledger.PurchaseFacts,
    ) -> ledger.Reservation:
        return ledger.authorize_held(
            session, principal, agent=agent, intent_id=intent_id, facts=facts, now=self._clock.now()
        )

    def _add_catalog_host(self, session: Session, principal: Principal, agent: Agent, host: str) -> None:
        add_catalog_host(session, agent=agent, host=host, actor=principal.actor, now=self._clock.now())

    def _audit_denied_before_request(
        self, principal: Principal, agent: Agent, denied: LocationDenied
    ) -> None:
        decision = denied.decision
        with self._db.write() as session:
            audit(
                session,
                org_id=agent.org_id,
                type="payment.denied",
                actor=principal.actor,
                agent_id=agent.id,
                data={
                    "reasons": list(decision.reasons),
                    "rules": list(decision.rules),
                    "versions": decision.versions,
                    "host": denied.target.host,
                    "path": denied.target.path,
                    "stage": "before_request",
                },
                now=self._clock.now(),
            )

    def _audit_host_denied(
        self, session: Session, principal: Principal, agent: Agent, request: FetchPaidInput
    ) -> None:
        audit(
            session,
            org_id=agent.org_id,
            type="payment.denied",
            actor=principal.actor,
            agent_id=agent.id,
            data={"reasons": ["host_not_allowed"], "host": request.host, "stage": "before_request"},
            now=self._clock.now(),
        )

    async def _balance_of(self, owner: str, selection: Selection) -> int | None:
        """The wallet's balance for the preflight's wallet step: a value already known, unless it
        says the wallet cannot pay; then (or with nothing known yet, joining the read started with
        the seller's first request) only the chain's fresh answer counts."""
        balances = self._chain.balances
        where = {"network": selection.network, "asset": selection.asset, "owner": owner}
        balance = balances.known(**where)
        if balance is None or balance < selection.amount_atomic:
            balance = await balances.read(**where)
        return balance

    def _prefetch_balances(self, policy: Policy, wallet: Wallet) -> None:
        """Start reading the wallet's balance on each network the policy pays on, unless a value
        is known: the read runs while the seller answers the first request."""
        for network in policy.networks:
            asset = self._settings.usdc_address(network)
            if asset is None or not self._chain.has_rpc(network):
                continue
            where = {"network": network, "asset": asset, "owner": wallet.address}
            if self._chain.balances.known(**where) is None:
                self._chain.balances.prefetch(**where)

    def _audit_insufficient(
        self,
        session: Session,
        principal: Principal,
        agent: Agent,
        wallet: Wallet,
        selection: Selection,
        error: InsufficientFunds,
    ) -> None:
        audit(
            session,
            org_id=agent.org_id,
            type="payment.insufficient_funds",
            actor=principal.actor,
            agent_id=agent.id,
            data={
                "payer": wallet.address,
                "network": selection.network,
                "balanceUsd": error.extra["balanceUsdc"],
                "amountUsd": error.extra["amountUsdc"],
            },
            now=self._clock.now(),
        )

    async def sign(
        self,
        principal: Principal,
        intent: PaymentIntent,
        wallet: Wallet,
        selection: Selection,
        max_amount_usd: Decimal | None,
    ) -> SignedTransfer:
        """The wallet's signature of the authorised intent; a refusal or failure fails the intent
        (nothing was signed) and raises."""
        try:
            signer = signer_for(
                wallet,
                self._settings.master,
                usdc_by_network=self._settings.assets,
                clock=self._clock,
                cdp=await self._cdp_access(wallet),
            )
            # Checked again against what is signed (the intent's amount, which the signer holds
            # the offer to), not only against the offer.
            check_max(intent.amount_atomic, max_amount_usd)
            signed = await signer.sign_payment(intent_to_sign(intent), transfer_request(selection))
        except SignRefused as refused:
            await self._db.writing(self._record_unsigned, principal, intent.id, wallet, refused)
            log.warning("the signer refused %s: %s", intent.id, refused.reason)
            raise
        except CdpError as refused:
            # CDP did not sign (its policy refused, it was out of reach, or it refused the request):
            # the intent fails with CDP's code before anything reaches the seller.
            await self._db.writing(self._record_unsigned, principal, intent.id, wallet, refused)
            log.warning(
                "CDP did not sign %s: %s %s", intent.id, refused.code, refused.extra.get("cdpError", "")
            )
            raise type(refused)(**refused.extra, intentId=intent.id) from None
        except (SignerError, ValueError) as exc:
            await self._db.run(
                self._update,
                principal,
                intent.id,
                IntentStatus.FAILED,
                "payment.failed",
                failure_code="signing_failed",
            )
            log.warning("signing failed for %s: %s", intent.id, type(exc).__name__)
            raise SigningFailed() from exc
        except AmountExceedsMax:
            await self._db.run(
                self._update,
                principal,
                intent.id,
                IntentStatus.FAILED,
                "payment.failed",
                failure_code="amount_exceeds_max",
            )
            raise
        return signed

    async def submit(
        self,
        principal: Principal,
        agent: Agent,
        intent_id: str,
        *,
        wallet: Wallet,
        selection: Selection,
        sealed_with: str | None = None,
        **fields: object,
    ) -> PaymentIntent:
        """Record, durably, that the signed payment leaves now (with `fields`, holding a value sealed
        with the master key `sealed_with` names, if any); raise AgentDisabled instead when the agent
        was disabled since the reservation: then nothing leaves."""
        intent = await self._db.run(self._submit, principal, agent, intent_id, sealed_with, **fields)
        if intent.status == IntentStatus.FAILED:
            # Disabled since the reservation: the signed authorisation never leaves this process.
            raise AgentDisabled(intentId=intent.id)
        self._spent(intent, wallet, selection)
        return intent

    def _spent(self, intent: PaymentIntent, wallet: Wallet, selection: Selection) -> None:
        """The wallet's known balance, less what leaves now."""
        self._chain.balances.spent(
            network=selection.network,
            asset=selection.asset,
            owner=wallet.address,
            amount=intent.amount_atomic,
        )

    async def _pay(
        self,
        principal: Principal,
        agent: Agent,
        intent: PaymentIntent,
        wallet: Wallet,
        challenge: Challenge,
        selection: Selection,
        first: SellerResponse,
        request: FetchPaidInput,
        deadline: float,
        *,
        signed: SignedTransfer | None,
    ) -> PaidOutcome:
        """Send the payment and record the seller's answer. `signed`: signed ahead and recorded
        `submitted` with the reservation; otherwise it is signed and recorded now."""
        ahead = signed is not None
        if signed is None:
            signed = await self.sign(principal, intent, wallet, selection, request.max_amount_usd)
        authorization, signature = signed.authorization, signed.signature
        identifier = payment_identifier(intent.id) if declaration(challenge) is not None else None

        header_name, header_value = payment_header(
            challenge, selection, authorization, signature, identifier=identifier
        )
        if ahead:
            self._spent(intent, wallet, selection)
        else:
            intent = await self.submit(principal, agent, intent.id, wallet=wallet, selection=selection)
        # Exactly the request that was asked to pay (after redirects: the last hop's), now paid.
        asked = first.request
        paid_request = SellerRequest(
            asked.method, first.url, {**asked.headers, header_name: header_value}, asked.body
        )
        try:
            # Once, to the URL that asked, at the address that asked: never a redirect, never a retry.
            response = await self._send_paid(paid_request, deadline=deadline, pin=first.peer)
        except ResponseLost as exc:
            await self._db.run(
                self._update,
                principal,
                intent.id,
                IntentStatus.SUBMITTED,
                "payment.outcome_unknown",
                failure_code="answer_lost",
            )
            raise PaymentOutcomeUnknown(intentId=intent.id, idempotencyKey=intent.idempotency_key) from exc
        except PaywardenError as exc:
            # Refused before a byte was written (unreachable, blocked, out of time): the signed
            # authorisation never left this process, so it can never move money.
            await self._db.run(
                self._update,
                principal,
                intent.id,
                IntentStatus.FAILED,
                "payment.failed",
                failure_code=exc.code,
            )
            raise
        return await self._record_answer(
            principal, intent, response, challenge, identified=identifier is not None
        )

    def _record_unsigned(
        self,
        session: Session,
        principal: Principal,
        intent_id: str,
        wallet: Wallet,
        failure: SignRefused | CdpError,
    ) -> None:
        """Nothing was signed (the signer refused, or CDP did not sign): the intent fails with the
        failure's code, so it stops counting against the caps, and a refusal is a wallet audit event."""
        now = self._clock.now()
        ledger.update_intent(
            session,
            principal,
            intent_id=intent_id,
            to=IntentStatus.FAILED,
            now=now,
            event="payment.failed",
            failure_code=failure.code,
        )
        if isinstance(failure, SignRefused):
            record_sign_refused(
                session, wallet=wallet, intent_id=intent_id, refused=failure, actor=principal.actor, now=now
            )
        elif isinstance(failure, CdpPolicyRefused):
            record_cdp_policy_refusal(
                session, wallet=wallet, intent_id=intent_id, actor=principal.actor, now=now
            )

    async def _cdp_access(self, wallet: Wallet) -> CdpAccess | None:
        """For a `cdp` wallet, how its signer reaches CDP (the organisation's sealed credentials are
        read now: they may have been replaced since the process started)."""
        if wallet.mode != WalletMode.CDP:
            return None
        sealed = await self._db.reading(sealed_cdp_credentials, org_id=wallet.org_id)
        return CdpAccess(
            api_url=self._settings.cdp_api_url, sealed_credentials=sealed, pool=self._cdp_clients
        )

    async def _send_paid(self, request: SellerRequest, *, deadline: float, pin: str | None) -> SellerResponse:
        """The paid request. A process that begins to stop while the seller has not answered waits
        only what its grace period leaves calls: then the answer counts as lost (the intent stays
        `submitted`), and the call says so with its idempotency key instead of being cut off."""
        with self._stopping.bounded(self._answer_after_stop_s):
            return await self._sellers.send(request, deadline=deadline, after_payment=True, pin=pin)
        raise ResponseLost("the process stopped before the seller answered")

    async def _record_answer(
        self,
        principal: Principal,
        intent: PaymentIntent,
        response: SellerResponse,
        challenge: Challenge,
        *,
        identified: bool,
    ) -> PaidOutcome:
        receipt = receipt_of(response, challenge)
        claimed = receipt.transaction if receipt else None
        kept = kept_of(response, challenge)  # kept whether the seller served or not
        now = self._clock.now()
        served = 200 <= response.status < 300 and not (receipt is not None and not receipt.success)
        if served:
            try:
                intent = await self._db.run(
                    self._update,
                    principal,
                    intent.id,
                    IntentStatus.SETTLEMENT_PENDING,
                    "payment.receipt",
                    seller_status=response.status,
                    seller_tx_hash=claimed,
                    completed_at=now,
                    **kept,
                )
            except SQLAlchemyError:
                # The seller served and was paid; only our record of it failed. Say so, no more.
                log.exception("could not record the receipt of intent %s", intent.id)
                return PaidOutcome(
                    intent,
                    response.status,
                    False,
                    body_of(response),
                    response.body_error,
                    ReceiptState.UNKNOWN,
                )
            intent = await self._settle_later(principal, intent, named=claimed is not None)
            return PaidOutcome(intent, response.status, False, body_of(response), response.body_error)

        reason = seller_reason(receipt, response)
        # A seller that keeps payment identifiers says 409 when it knows this one from another payment.
        conflict = identified and response.status == CONFLICT_STATUS
        rejected = response.status == 402 or (receipt is not None and not receipt.success)
        if conflict:
            code = PaymentIdentifierConflict.code
        else:
            code = "payment_rejected_by_seller" if rejected else "payment_not_completed"
        try:
            intent = await self._db.run(
                self._update,
                principal,
                intent.id,
                IntentStatus.FAILED,
                "payment.failed",
                seller_status=response.status,
                seller_tx_hash=claimed,
                failure_code=code,
                seller_reason=reason,
                completed_at=now,
                **kept,
            )
        except SQLAlchemyError:
            log.exception("could not record the failed receipt of intent %s", intent.id)
        fields = {"httpStatus": response.status, **after_payment_fields(intent)}
        if conflict:
            raise PaymentIdentifierConflict(seller_reason=reason, **fields)
        if rejected:
            raise PaymentRejectedBySeller(seller_reason=reason, **fields)
        redirect = response.status in REDIRECT_STATUSES or response.redirect_not_followed
        raise PaymentNotCompleted(
            seller_reason=reason, redirectNotFollowed=True if redirect else None, **fields
        )

    async def _settle_later(
        self, principal: Principal, intent: PaymentIntent, *, named: bool
    ) -> PaymentIntent:
        """The chain's look at a served payment runs in the background, so the answer never waits on
        the RPC: it says `pending`, and the look (or, failing it, the reconciler) settles the intent
        for list_payments, get_budget and replays. When the seller named its transaction, the
        answer may wait for that look up to PAYWARDEN_SETTLEMENT_WAIT_MS."""
        look = asyncio.get_running_loop().create_task(self._follow_up(principal, intent))
        self._follow_ups.add(look)
        look.add_done_callback(self._follow_ups.discard)
        wait_s = self._settings.settlement_wait_ms / 1000
        if not named or wait_s <= 0:
            return intent
        done, _ = await asyncio.wait({look}, timeout=wait_s)
        return look.result() if done else intent

    async def _follow_up(self, principal: Principal, intent: PaymentIntent) -> PaymentIntent:
        try:
            return await self.verify_settlement(principal, intent)
        except Exception:  # the reconciler looks again; the answer already went out
            log.exception("could not check the settlement of intent %s", intent.id)
            return intent

    async def settled_in_background(self) -> None:
        """Wait for every background settlement look started so far (tests, and shutdown)."""
        while self._follow_ups:
            await asyncio.gather(*list(self._follow_ups), return_exceptions=True)

    async def verify_settlement(self, principal: Principal, intent: PaymentIntent) -> PaymentIntent:
        """Mark the intent settled if, and only if, the chain shows its transfer."""
        return await self._settlement.check(intent, principal=principal)

    # -- replays ---------------------------------------------------------------------------

    def _paid_replay(self, intent: PaymentIntent) -> PaidOutcome | None:
        """fetch_paid's answer for a key whose payment the seller served."""
        if intent.status in (IntentStatus.SETTLED, IntentStatus.SETTLEMENT_PENDING):
            return PaidOutcome(intent, intent.seller_status, True, None)
        return None

    async def resume(self, principal: Principal, intent: PaymentIntent, call: Call[R]) -> R | PendingOutcome:
        """The key already names a purchase: answer for it, never pay it again."""
        if intent.fingerprint != call.fingerprint:
            raise IdempotencyKeyReused()
        now = self._clock.now()
        if intent.status == IntentStatus.CREATED:
            approval = await self._db.reading(self._approval_of, principal, intent.id)
            assert approval is not None
            approvals.raise_if_closed(approval, now)
            return self._pending(intent, approval)
        if intent.status in (IntentStatus.SUBMITTED, IntentStatus.SETTLEMENT_PENDING, IntentStatus.FAILED):
            # A seller may settle after answering badly: the chain, not the answer, decides.
            intent = await self.verify_settlement(principal, intent)
        answer = call.completed(intent)
        if answer is not None:
            return answer
        if intent.status in (IntentStatus.FAILED, IntentStatus.EXPIRED):
            if intent.failure_code == AgentDisabled.code:
                # Closed when the agent was disabled (its approval denied, or approved but not
                # yet used): it never pays, even once the agent is enabled again.
                raise AgentDisabled(intentId=intent.id)
            approval = await self._db.reading(self._approval_of, principal, intent.id)
            if approval is not None:
                approvals.raise_if_closed(approval, now)
            raise IntentNotReplayable(intentId=intent.id, idempotencyKey=intent.idempotency_key)
        raise PaymentInProgress(intentId=intent.id, idempotencyKey=intent.idempotency_key)

    # -- writes ----------------------------------------------------------------------------

    def _submit(
        self, principal: Principal, agent: Agent, intent_id: str, sealed_with: str | None, **fields: object
    ) -> PaymentIntent:
        """Submitted, durably, before the signature leaves (see `_update`); or failed with
        `agent_disabled` when the agent was disabled since the reservation."""
        with self._db.write(durable=True) as session:
            if sealed_with is not None:
                require_current_key(session, key_id=sealed_with)  # never sealed under a replaced key
            return ledger.submit(
                session, principal, agent=agent, intent_id=intent_id, now=self._clock.now(), **fields
            )

    def _update(
        self, principal: Principal, intent_id: str, to: IntentStatus, event: str, **fields: object
    ) -> PaymentIntent:
        # The record that a signature is about to leave must outlive a power cut: were it lost,
        # the caps would forget a payment the seller can still settle.
        with self._db.write(durable=to == IntentStatus.SUBMITTED) as session:
            return ledger.update_intent(
                session, principal, intent_id=intent_id, to=to, now=self._clock.now(), event=event, **fields
            )
