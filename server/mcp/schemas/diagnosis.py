"""diagnose_payment's result (`paywarden doctor --json` prints the same fields). No seller text:
offers' fields are simple tokens or `[unreadable]`, and the seller's description and error are
never read into it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from server.mcp.schemas.common import timestamp_or_none, usd
from server.payments.preflight.diagnosis import Cause, Diagnosis, Status
from server.payments.preflight.pipeline import Step, StepStatus
from server.payments.preflight.report import explain, issue_report


class CauseView(BaseModel):
    code: Cause
    reasons: list[str]
    fetchPaidError: str | None


class RequestView(BaseModel):
    method: str
    url: str
    httpStatus: int | None
    x402Version: int | None


class AcceptView(BaseModel):
    scheme: str | None
    network: str | None
    asset: str | None
    amount: str | None
    amountUsd: str | None
    payTo: str | None
    payable: bool
    reason: str | None


class WalletView(BaseModel):
    address: str
    source: str
    network: str | None
    balanceUsdc: str | None
    amountUsdc: str | None
    rpcHost: str | None


class ChatRuleView(BaseModel):
    ruleId: str
    kind: str
    host: str | None
    pathPrefix: str | None
    limitUsd: str | None
    window: str | None
    expiresAt: str | None


class RuleBlockView(BaseModel):
    ruleId: str
    scope: str
    window: str | None
    limitUsd: str
    leavesUsd: str
    resetsAt: str | None


class StepView(BaseModel):
    """One step of the preflight fetch_paid runs: passed, failed (with the error fetch_paid would
    return), skipped, not_needed (no payment asked) or not_reached."""

    step: Step
    status: StepStatus
    code: str | None


class DiagnosisResult(BaseModel):
    status: Status
    summary: str
    explanation: str
    action: str
    cause: CauseView | None
    warnings: list[str]
    request: RequestView
    resourceHost: str | None
    accepts: list[AcceptView]
    wallet: WalletView | None
    chatRules: list[ChatRuleView]
    ruleBlocks: list[RuleBlockView]
    steps: list[StepView]
    issueReport: str


def _usd(atomic: int | None) -> str | None:
    return None if atomic is None else usd(atomic)


def diagnosis(d: Diagnosis) -> dict[str, Any]:
    told = explain(d)
    wallet = d.wallet
    result = DiagnosisResult(
        status=d.status,
        summary=told.summary,
        explanation=told.explanation,
        action=told.action,
        cause=None
        if d.cause is None
        else CauseView(code=d.cause, reasons=list(d.reasons), fetchPaidError=d.cause.fetch_paid_error),
        warnings=[str(warning) for warning in d.warnings],
        request=RequestView(
            method=d.request.method,
            url=d.request.url,
            httpStatus=d.request.http_status,
            x402Version=d.request.x402_version,
        ),
        resourceHost=d.resource_host,
        accepts=[
            AcceptView(
                scheme=a.scheme,
                network=a.network,
                asset=a.asset,
                amount=a.amount,
                amountUsd=_usd(a.amount_atomic),
                payTo=a.pay_to,
                payable=a.payable,
                reason=a.reason,
            )
            for a in d.accepts
        ],
        wallet=None
        if wallet is None
        else WalletView(
            address=wallet.address,
            source=str(wallet.source),
            network=wallet.network,
            balanceUsdc=_usd(wallet.balance_atomic),
            amountUsdc=_usd(wallet.needed_atomic),
            rpcHost=wallet.rpc_host,
        ),
        chatRules=[
            ChatRuleView(
                ruleId=rule.rule_id,
                kind=str(rule.kind),
                host=rule.host,
                pathPrefix=rule.path_prefix,
                limitUsd=_usd(rule.limit_atomic),
                window=None if rule.window is None else str(rule.window),
                expiresAt=timestamp_or_none(rule.expires_at),
            )
            for rule in d.chat_rules
        ],
        ruleBlocks=[
            RuleBlockView(
                ruleId=block.rule_id,
                scope=str(block.scope),
                window=None if block.window is None else str(block.window),
                limitUsd=usd(block.limit_atomic),
                leavesUsd=usd(block.remaining_atomic),
                resetsAt=timestamp_or_none(block.resets_at),
            )
            for block in d.rule_blocks
        ],
        steps=[StepView(step=seen.step, status=seen.status, code=seen.code) for seen in d.steps],
        issueReport=issue_report(d),
    )
    return result.model_dump(mode="json")
