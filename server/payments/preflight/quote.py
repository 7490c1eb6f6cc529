"""quote_payment: what fetch_paid would decide for a URL, without paying.

The quote runs fetch_paid's preflight (preflight.py): the same host check, the URL requested once
through the same seller client, the same offer; the policy decides with the spend counted now. Nothing
is signed, reserved or recorded: the answer is advice, and a real payment decides again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlmodel import Session

from auth.principal import Principal
from server.kit.clock import Clock
from server.kit.db import Database
from server.payments import ledger
from server.payments.errors import PolicyDenied
from server.payments.fingerprint import request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.preflight.pipeline import Plan, Preflight, Step
from server.policy.engine import Decision
from server.sellers.client import SellerClient
from server.settings import Settings
from server.tenancy.service import get_agent
from server.x402.selection import Selection


class QuoteOutcome(StrEnum):
    WOULD_PAY = "would_pay"
    WOULD_NEED_APPROVAL = "would_need_approval"
    WOULD_DENY = "would_deny"
    NO_PAYMENT_NEEDED = "no_payment_needed"


@dataclass(frozen=True)
class Quote:
    outcome: QuoteOutcome
    host: str
    policy_version: int
    http_status: int | None = None
    selection: Selection | None = None  # what the seller asks for, when it asked for payment
    decision: Decision | None = None  # the policy's decision on it
    wallet_configured: bool | None = None
    host_denied: bool = False  # refused before anything was sent: the host is not allowed


class QuoteService:
    def __init__(self, *, db: Database, settings: Settings, sellers: SellerClient, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._preflight = Preflight(
            sellers=sellers, assets=settings.assets, timeout_ms=settings.fetch_timeout_ms, clock=clock, db=db
        )

    async def quote(self, principal: Principal, request: FetchPaidInput) -> Quote:
        async def decide(facts: ledger.PurchaseFacts) -> Decision:
            return await self._db.reading(self._decide, principal, facts)

        # The wallet is reported, not required: the quote is the policy's answer.
        plan = Plan(
            principal=principal,
            wallet_required=False,
            decide=decide,
            key="quote-only",
            fingerprint=request_fingerprint(request),
        )
        passage = await self._preflight.run(request, plan)
        assert passage.context is not None
        version = passage.context.policy.version
        if passage.failed == Step.HOST and isinstance(passage.error, PolicyDenied):
            raise passage.error  # the organisation blocked the host: the seller circuit breaker
        if passage.failed == Step.HOST:
            # fetch_paid would not even send the request, so neither does the quote.
            return Quote(QuoteOutcome.WOULD_DENY, request.host, version, host_denied=True)
        if passage.denied is not None:
            # A request (or a redirect hop) fetch_paid would refuse before sending it.
            return Quote(QuoteOutcome.WOULD_DENY, request.host, version, decision=passage.denied.decision)
        if passage.error is not None and passage.failed != Step.DECISION:
            raise passage.error
        first = passage.first
        assert first is not None
        if first.status != 402:
            return Quote(QuoteOutcome.NO_PAYMENT_NEEDED, request.host, version, http_status=first.status)
        decision = passage.decision
        assert decision is not None
        outcome = {
            "deny": QuoteOutcome.WOULD_DENY,
            "hold": QuoteOutcome.WOULD_NEED_APPROVAL,
            "allow": QuoteOutcome.WOULD_PAY,
        }[decision.outcome]
        return Quote(
            outcome,
            request.host,
            decision.policy_version,
            http_status=first.status,
            selection=passage.selection,
            decision=decision,
            wallet_configured=passage.wallet is not None,
        )

    def _decide(self, session: Session, principal: Principal, facts: ledger.PurchaseFacts) -> Decision:
        assert principal.agent_id is not None
        agent = get_agent(session, principal, principal.agent_id)
        return ledger.decide(session, agent=agent, facts=facts, now=self._clock.now())
