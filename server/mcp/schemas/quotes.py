"""quote_payment's result."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from server.mcp.schemas.common import usd, usd_or_none
from server.payments.errors import PolicyDenied
from server.payments.preflight.quote import Quote, QuoteOutcome
from server.vocabulary import HoldReason


class QuoteResult(BaseModel):
    model_config = ConfigDict(extra="allow")

    outcome: QuoteOutcome
    host: str
    policyVersion: int
    httpStatus: int | None = None
    amountUsd: str | None = None
    network: str | None = None
    asset: str | None = None
    payTo: str | None = None
    reasons: list[str] | None = None
    reason: HoldReason | None = None
    thresholdUsd: str | None = None
    walletConfigured: bool | None = None
    rules: list[str] | None = None
    ruleScopes: dict[str, str] | None = None
    hint: str | None = None


def quote(view: Quote) -> dict[str, Any]:
    result = QuoteResult(outcome=view.outcome, host=view.host, policyVersion=view.policy_version)
    if view.host_denied:
        result.reasons = ["host_not_allowed"]
    if view.http_status is not None:
        result.httpStatus = view.http_status
    if view.selection is not None:
        result.amountUsd = usd(view.selection.amount_atomic)
        result.network = view.selection.network
        result.asset = "USDC"
        result.payTo = view.selection.pay_to
        result.walletConfigured = view.wallet_configured
    decision = view.decision
    if decision is not None and view.outcome == QuoteOutcome.WOULD_DENY:
        for name, value in PolicyDenied.fields_for(decision).items():
            setattr(result, name, value)
    if decision is not None and view.outcome == QuoteOutcome.WOULD_NEED_APPROVAL:
        result.reason = HoldReason(decision.hold_reason) if decision.hold_reason else None
        # As on an approval: the threshold is shown when it is the reason named.
        threshold = decision.threshold_usd if result.reason == HoldReason.THRESHOLD else None
        result.thresholdUsd = usd_or_none(threshold)
        if decision.rules:
            result.rules = list(decision.rules)
            result.ruleScopes = dict(decision.rule_scopes)
    return result.model_dump(mode="json", exclude_unset=True)
