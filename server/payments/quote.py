"""quote_payment: what fetch_paid would decide for a URL, without paying.

The URL is requested once, through the same seller client and after the same host check as
fetch_paid; the policy decides on the seller's challenge with the spend counted right now. Nothing
is signed, reserved or recorded: the answer is advice, and a real payment decides again.
"""

from __future__ import annotations

from typing import Any

import anyio

from auth.principal import Principal
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.money import format_usd
from server.payments import ledger
from server.payments.fingerprint import request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.purchase import denial_fields, load_context, purchase_facts, read_offer
from server.payments.results import usd
from server.policy.engine import Decision, host_allowed
from server.sellers.client import SellerClient, SellerRequest
from server.settings import Settings
from server.tenancy.service import get_agent

NO_WALLET = "0x0000000000000000000000000000000000000000"


class QuoteService:
    def __init__(self, *, db: Database, settings: Settings, sellers: SellerClient, clock: Clock) -> None:
        self._db = db
        self._settings = settings
        self._sellers = sellers
        self._clock = clock

    async def quote(self, principal: Principal, request: FetchPaidInput) -> dict[str, Any]:
        deadline = anyio.current_time() + self._settings.fetch_timeout_ms / 1000
        context = await self._db.run(load_context, self._db, principal, request.host)
        base: dict[str, Any] = {"host": request.host, "policyVersion": context.policy.version}
        if not host_allowed(context.policy, request.host, listed=context.listed):
            # fetch_paid would not even send the request, so neither does the quote.
            return {**base, "outcome": "would_deny", "reasons": ["host_not_allowed"]}

        first = await self._sellers.fetch(
            SellerRequest(request.method, request.url, request.headers, request.body), deadline=deadline
        )
        if first.status != 402:
            return {**base, "outcome": "no_payment_needed", "httpStatus": first.status}
        offered = read_offer(first, request, context.policy, self._settings)
        selection = offered.selection
        wallet = context.wallet
        facts = purchase_facts(
            request,
            first,
            offered,
            key="quote-only",
            fingerprint=request_fingerprint(request),
            payer=wallet.address if wallet else NO_WALLET,
            wallet_mode=wallet.mode if wallet else "none",
        )
        decision = await self._db.run(self._decide, principal, facts)
        quote = {
            **base,
            "policyVersion": decision.policy_version,
            "httpStatus": first.status,
            "amountUsd": format_usd(selection.amount_atomic, atomic=True),
            "network": selection.network,
            "asset": "USDC",
            "payTo": selection.pay_to,
            "walletConfigured": wallet is not None,
        }
        if decision.outcome == "deny":
            return {**quote, **denial_fields(decision), "outcome": "would_deny"}
        if decision.outcome == "hold":
            quote.update(
                outcome="would_need_approval",
                reason=decision.hold_reason,
                thresholdUsd=usd(decision.threshold_usd),
            )
            if decision.rules:
                quote.update(rules=list(decision.rules), ruleScopes=dict(decision.rule_scopes))
            return quote
        return {**quote, "outcome": "would_pay"}

    def _decide(self, principal: Principal, facts: ledger.PurchaseFacts) -> Decision:
        assert principal.agent_id is not None
        with self._db.read() as session:
            agent = get_agent(session, principal, principal.agent_id)
            return ledger.decide(session, agent=agent, facts=facts, now=self._clock.now())
