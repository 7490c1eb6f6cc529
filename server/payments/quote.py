"""quote_payment: what fetch_paid would decide for a URL, without paying.

The URL is requested once, through the same seller client and after the same host check as
fetch_paid; the policy decides on the seller's challenge with the spend counted right now. Nothing
is signed, reserved or recorded: the answer is advice, and a real payment decides again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import anyio

from auth.principal import Principal
from server.kit.clock import Clock
from server.kit.db import Database
from server.payments import ledger
from server.payments.fingerprint import request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.location import LocationDenied
from server.payments.offer import purchase_facts, read_offer
from server.payments.purchase import load_context
from server.policy.engine import Decision, host_allowed
from server.sellers.client import SellerClient, SellerRequest
from server.settings import Settings
from server.tenancy.service import get_agent
from server.x402.selection import Selection

NO_WALLET = "0x0000000000000000000000000000000000000000"


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
        self._settings = settings
        self._sellers = sellers
        self._clock = clock

    async def quote(self, principal: Principal, request: FetchPaidInput) -> Quote:
        deadline = anyio.current_time() + self._settings.fetch_timeout_ms / 1000
        context = await self._db.run(load_context, self._db, principal, request.host, self._clock.now())
        version = context.policy.version
        if not host_allowed(context.policy, request.host, listed=context.listed):
            # fetch_paid would not even send the request, so neither does the quote.
            return Quote(QuoteOutcome.WOULD_DENY, request.host, version, host_denied=True)

        try:
            first = await self._sellers.fetch(
                SellerRequest(request.method, request.url, request.headers, request.body),
                deadline=deadline,
                judge=context.judge(),
            )
        except LocationDenied as denied:
            # A request (or a redirect hop) fetch_paid would refuse before sending it.
            return Quote(QuoteOutcome.WOULD_DENY, request.host, version, decision=denied.decision)
        if first.status != 402:
            return Quote(QuoteOutcome.NO_PAYMENT_NEEDED, request.host, version, http_status=first.status)
        offered = read_offer(first, request, context.policy, self._settings)
        wallet = context.wallet
        facts = purchase_facts(
            request,
            first,
            offered,
            key="quote-only",
            fingerprint=request_fingerprint(request),
            payer=wallet.address if wallet else NO_WALLET,
            wallet_mode=wallet.mode if wallet else None,
        )
        decision = await self._db.run(self._decide, principal, facts)
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
            selection=offered.selection,
            decision=decision,
            wallet_configured=wallet is not None,
        )

    def _decide(self, principal: Principal, facts: ledger.PurchaseFacts) -> Decision:
        assert principal.agent_id is not None
        with self._db.read() as session:
            agent = get_agent(session, principal, principal.agent_id)
            return ledger.decide(session, agent=agent, facts=facts, now=self._clock.now())
