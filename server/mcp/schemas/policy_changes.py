"""request_policy_change's and get_policy_change_status's results: a policy change request as its
agent sees it. The agent's note is never in the structured result (`note` only marks it
untrusted); its text is in a fenced block of its own."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from server.approvals.policy_changes import RequestView, manage_url, requested
from server.mcp.content import fence
from server.mcp.schemas.common import timestamp, timestamp_or_none
from server.models import PolicyChangeRequest
from server.vocabulary import ApprovalPrompt, PolicyChangeStatus

NEXT = {
    PolicyChangeStatus.PENDING: (
        "Nothing has changed yet. Give the user manageUrl as a plain link to open: an owner or admin of "
        "the organisation approves or rejects this change there with a passkey. Then poll "
        "get_policy_change_status with requestId."
    ),
    PolicyChangeStatus.APPROVED: (
        "A person approved this change and it is in force now: retry what the policy refused before."
    ),
    PolicyChangeStatus.REJECTED: (
        "A person rejected this change, so nothing changed. Do not ask for it again unless the user asks."
    ),
    PolicyChangeStatus.EXPIRED: (
        "Nobody decided within 24 hours, so nothing changed. Ask again only if it is still needed."
    ),
}


class RuleLimitChange(BaseModel):
    ruleId: str
    limitUsd: str


class ChangeDocument(BaseModel):
    """The change as it was stored and is bound into the deciding member's passkey challenge."""

    model_config = ConfigDict(extra="forbid")

    addAllowHosts: list[str] | None = None
    removeDenyHosts: list[str] | None = None
    addNetworks: list[str] | None = None
    removePayToDeny: list[str] | None = None
    maxUsdPerTx: str | None = None
    dailyCapUsd: str | None = None
    stepUpThresholdUsd: str | None = None
    removeStepUpThreshold: bool | None = None
    velocityMaxTx: int | None = None
    velocityMaxUsd: str | None = None
    allowCatalogHosts: bool | None = None
    allowUnverifiedSellers: bool | None = None
    raiseRuleLimits: list[RuleLimitChange] | None = None
    removeRules: list[str] | None = None


class UntrustedNote(BaseModel):
    """The note is the agent's own words: its text is only in a fenced block of its own."""

    untrusted: Literal[True]
    characters: int


class PolicyChangeStatusResult(BaseModel):
    requestId: str
    status: Literal["pending", "approved", "rejected", "expired"]
    manageUrl: str
    change: ChangeDocument
    note: UntrustedNote
    policyVersion: int  # the agent's policy version when it asked
    appliedPolicyVersion: int | None  # the version the approval made; None while none did
    createdAt: str
    expiresAt: str
    decidedAt: str | None
    next: str


class RequestPolicyChangeResult(PolicyChangeStatusResult):
    created: bool  # False: the same change was already waiting, and this is that request
    approvalPrompt: ApprovalPrompt  # what became of offering manageUrl through the client


def _fields(view: RequestView, public_url: str) -> dict[str, Any]:
    row = view.request
    return {
        "requestId": row.id,
        "status": str(view.status),
        "manageUrl": manage_url(public_url, row.id),
        "change": ChangeDocument.model_validate(requested(row).document()),
        "note": UntrustedNote(untrusted=True, characters=len(row.note)),
        "policyVersion": row.policy_version,
        "appliedPolicyVersion": row.applied_version,
        "createdAt": timestamp(row.created_at),
        "expiresAt": timestamp(row.expires_at),
        "decidedAt": timestamp_or_none(row.decided_at),
        "next": NEXT[view.status],
    }


def _dumped(model: BaseModel) -> dict[str, Any]:
    document = model.model_dump(mode="json")
    document["change"] = {name: value for name, value in document["change"].items() if value is not None}
    return document


def status(view: RequestView, *, public_url: str) -> dict[str, Any]:
    return _dumped(PolicyChangeStatusResult(**_fields(view, public_url)))


def asked(view: RequestView, *, public_url: str, created: bool, prompt: ApprovalPrompt) -> dict[str, Any]:
    return _dumped(
        RequestPolicyChangeResult(**_fields(view, public_url), created=created, approvalPrompt=prompt)
    )


def note_block(row: PolicyChangeRequest) -> str:
    """The agent's note, fenced and labelled: text an agent wrote, which may repeat anyone's words."""
    return fence(
        row.note,
        what=f"note sent with policy change request {row.id}",
        host=None,
        author="the agent that asked for the change (possibly repeating words it read elsewhere)",
    )
