"""get_approval_status's result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from server.approvals.service import AgentView
from server.mcp.schemas.common import timestamp, timestamp_or_none, usd
from server.vocabulary import ApprovalStatus, HoldReason

AgentStatus = Literal["pending", "approved", "denied", "expired", "superseded"]
# A consumed approval was approved and paid: the agent sees `approved`, with the intent it paid.
_AGENT_STATUS: dict[ApprovalStatus, AgentStatus] = {
    ApprovalStatus.PENDING: "pending",
    ApprovalStatus.APPROVED: "approved",
    ApprovalStatus.DENIED: "denied",
    ApprovalStatus.EXPIRED: "expired",
    ApprovalStatus.CONSUMED: "approved",
    ApprovalStatus.SUPERSEDED: "superseded",
}


class ApprovalStatusResult(BaseModel):
    approvalId: str
    status: AgentStatus
    intentId: str | None
    amountUsd: str
    host: str
    reason: HoldReason
    createdAt: str
    decidedAt: str | None
    expiresAt: str


def approval_status(view: AgentView) -> dict[str, Any]:
    approval = view.approval
    return ApprovalStatusResult(
        approvalId=approval.id,
        status=_AGENT_STATUS[view.status],
        intentId=view.intent_id,
        amountUsd=usd(approval.amount_atomic),
        host=approval.host,
        reason=approval.reason,
        createdAt=timestamp(approval.created_at),
        decidedAt=timestamp_or_none(approval.decided_at),
        expiresAt=timestamp(view.expires_at),
    ).model_dump(mode="json")
