"""/approvals and /approvals/{id}: the approvals inbox and the approval page. The inbox also lists
the policy changes agents asked for (`?tab=policy-changes`), which every member sees and owners
and admins decide on their own page (server/web/pages/policy_changes.py).

Only a signed-in member of the approval's organisation with role owner, admin or approver sees an
approval; anyone else gets the same "no such approval" page whether it exists or not, and a
visitor who is not signed in is sent to sign in first. Approve and Deny each need a fresh passkey
assertion, user verified, over a challenge that commits to that decision on exactly this payment
and to a single-use nonce (server/approvals/confirmation.py). An agent's token opens nothing here:
the pages read only the member's session cookie.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session
from starlette.responses import Response

from auth.passkeys import claim_challenge
from auth.sessions import SignedIn
from server.approvals import service as approvals
from server.approvals.errors import ApprovalNotFound
from server.kit.money import format_usd
from server.kit.networks import is_testnet, network_name
from server.models import Agent, Approval, Organization
from server.payments import decisions
from server.tenancy.service import find_org, get_agent
from server.vocabulary import ApprovalStatus, ChallengePurpose, HoldReason
from server.web.pages import policy_changes
from server.web.pages.ceremonies import decision_of, options_answer, read_answer
from server.web.pages.common import Visit
from server.web.pages.policy_changes import ChangeView

PATH = "/approvals"
CHANGES_TAB = "policy-changes"

REASONS = {
    HoldReason.RULE: "A hold rule of your organisation selects this payment.",
    HoldReason.CATALOG_NEW_HOST: (
        "The host is allowed only because the catalog lists it, and this is the first payment to it."
    ),
    HoldReason.NEW_PAY_TO: "Your organisation has never paid this payee.",
    HoldReason.INSTRUCTION_LIKE_DESCRIPTION: (
        "The seller's payment request reads like instructions to an AI agent. "
        "Check that paying it was your own idea."
    ),
    HoldReason.THRESHOLD: "The amount is at or above the agent's approval threshold.",
}
DONE = {
    "approved": (
        "You approved this payment. The agent may now pay it, once: a call of the agent's that waits "
        "for your decision pays within seconds; otherwise its next try with the same idempotency "
        "key pays."
    ),
    "denied": "You denied this payment. Nothing will be paid.",
}
# The challenge binds the whole resource, query and all: the page shows it whole, folding only
# what would push the decision off a phone's screen.
RESOURCE_SHOWN_AT_ONCE = 120
# The approval was used up since (the call that waited for it paid, or the agent's retry did).
PAID = "You approved this payment, and the agent has paid it."


@dataclass(frozen=True)
class ApprovalView:
    """An approval as the page shows it; every string is rendered as plain, escaped text."""

    id: str
    status: str
    agent: str
    amount_usd: str
    amount_atomic: int
    host: str
    resource: str
    # A long resource is folded behind its first characters; unfolded, it is shown whole.
    resource_start: str | None
    asset: str
    pay_to: str
    pay_to_short: str
    network: str
    network_name: str
    testnet: bool
    reason: str
    reason_text: str
    threshold_usd: str | None
    policy_version: object
    created_at: datetime
    expires_at: datetime
    minutes_left: int
    # What happened, in one sentence ("Approved by ana@example.com at ...: the payment was made");
    # None while it waits.
    outcome: str | None

    @property
    def pending(self) -> bool:
        return self.status == ApprovalStatus.PENDING


def _when(moment: datetime) -> str:
    return f"{moment.strftime('%Y-%m-%d %H:%M')} UTC"


def outcome(
    approval: Approval,
    status: ApprovalStatus,
    decider: str | None,
    *,
    agent_disabled: bool = False,
    handed_over: bool = False,
) -> str | None:
    """What became of an approval, as the page's heading says it. `agent_disabled`: its payment
    was closed when the agent was disabled (the approval was then denied if still pending).
    `handed_over`: the agent sends the payment itself (pay_x402), so Paywarden only signs it."""
    who = decider or "a member"
    when = _when(approval.decided_at) if approval.decided_at is not None else None
    if status == ApprovalStatus.PENDING:
        return None
    if agent_disabled and approval.decided_by is None:
        return f"Denied when the agent was disabled at {when}: nothing was paid"
    if agent_disabled:
        return f"Approved by {who} at {when}, but the agent was disabled before it paid: nothing was paid"
    if status == ApprovalStatus.CONSUMED and handed_over:
        return f"Approved by {who} at {when}: the payment was signed and handed to the agent to send"
    if status == ApprovalStatus.CONSUMED:
        return f"Approved by {who} at {when}: the payment was made"
    if status == ApprovalStatus.APPROVED:
        return f"Approved by {who} at {when}: the payment will be made when the agent retries"
    if status == ApprovalStatus.DENIED:
        return f"Denied by {who} at {when}: nothing was paid"
    if status == ApprovalStatus.EXPIRED and when is not None:
        return f"Approved by {who} at {when}, but the agent did not retry in time: nothing was paid"
    if status == ApprovalStatus.EXPIRED:
        return f"Nobody decided by {_when(approval.expires_at)}: nothing was paid"
    return "The agent asked again, and a newer approval replaced this one: nothing was paid under it"


def _view(
    approval: Approval,
    agent: Agent,
    now: datetime,
    decider: str | None = None,
    *,
    agent_disabled: bool = False,
    handed_over: bool = False,
) -> ApprovalView:
    status = approvals.effective_status(approval, now)
    expires_at = approvals.retry_deadline(approval) or approval.expires_at
    folded = len(approval.resource) > RESOURCE_SHOWN_AT_ONCE
    return ApprovalView(
        id=approval.id,
        status=str(status),
        agent=agent.name,
        amount_usd=format_usd(approval.amount_atomic, atomic=True),
        amount_atomic=approval.amount_atomic,
        host=approval.host,
        resource=approval.resource,
        resource_start=approval.resource[:RESOURCE_SHOWN_AT_ONCE] if folded else None,
        asset=approval.asset,
        pay_to=approval.pay_to,
        pay_to_short=f"{approval.pay_to[:6]}…{approval.pay_to[-4:]}",
        network=approval.network,
        network_name=network_name(approval.network),
        testnet=is_testnet(approval.network),
        reason=str(approval.reason),
        reason_text=REASONS.get(approval.reason, str(approval.reason)),
        threshold_usd=(
            format_usd(approval.threshold_atomic, atomic=True)
            if approval.threshold_atomic is not None
            else None
        ),
        policy_version=approval.decision.get("policyVersion"),
        created_at=approval.created_at,
        expires_at=expires_at,
        minutes_left=max(0, int((expires_at - now).total_seconds() + 59) // 60),
        outcome=outcome(approval, status, decider, agent_disabled=agent_disabled, handed_over=handed_over),
    )


def _inbox_of(
    session: Session, signed_in: SignedIn, now: datetime, *, decided: bool
) -> tuple[Organization, list[ApprovalView]]:
    """The member's organisation and the approvals waiting for them to decide (or, `decided`,
    the ones decided lately, newest first)."""
    principal = signed_in.principal
    org = find_org(session, principal, signed_in.member.org_id)
    if not decided:
        rows = approvals.pending_for_decider(session, principal, member=signed_in.member, now=now)
        return org, [_view(row, get_agent(session, principal, row.agent_id), now) for row in rows]
    rows = approvals.decided_for_decider(session, principal, member=signed_in.member)
    ended = decisions.ended_by_disabling(session, principal, among=list(rows))
    handed = decisions.handed_to_agent(session, principal, among=list(rows))
    return org, [
        _view(
            row,
            get_agent(session, principal, row.agent_id),
            now,
            approvals.decider_email(session, principal, row),
            agent_disabled=row.id in ended,
            handed_over=row.id in handed,
        )
        for row in rows
    ]


@dataclass(frozen=True)
class Inbox:
    org: Organization
    approvals: list[ApprovalView]
    # Policy changes agents asked for: those waiting (their count is the tab's), and on their
    # tab the latest whatever became of them.
    changes_waiting: list[ChangeView]
    changes_latest: list[ChangeView]


def _inbox(session: Session, signed_in: SignedIn, now: datetime, *, tab: str) -> Inbox:
    org, shown = _inbox_of(session, signed_in, now, decided=tab == "decided")
    waiting = policy_changes.waiting_views(session, signed_in, now)
    latest = policy_changes.latest_views(session, signed_in, now) if tab == CHANGES_TAB else []
    return Inbox(org, shown, waiting, [view for view in latest if not view.pending])


async def inbox(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member
    now = services.clock.now()
    tab = visit.request.query_params.get("tab")
    tab = tab if tab in ("decided", CHANGES_TAB) else "waiting"

    found = await services.db.reading(_inbox, signed_in, now, tab=tab)
    titles = {"waiting": "Approvals", "decided": "Decided approvals", CHANGES_TAB: "Policy changes"}
    return visit.render(
        "approvals.html",
        {
            "title": titles[tab],
            "nav": "approvals",
            "tab": tab,
            "may_decide": signed_in.member.role.may_approve,
            "approvals": found.approvals,
            "changes_waiting": found.changes_waiting,
            "changes_latest": found.changes_latest,
            "ttl_minutes": found.org.approval_ttl_seconds // 60,
            "notice": DONE.get(visit.request.query_params.get("done", "")),
        },
    )


def _approval_id(visit: Visit) -> str:
    approval_id = str(visit.request.path_params["approval_id"])
    if not approval_id.startswith("apr_") or len(approval_id) > 40:
        raise ApprovalNotFound()
    return approval_id


def _approval_view(session: Session, signed_in: SignedIn, approval_id: str, now: datetime) -> ApprovalView:
    """The approval as a member who may decide it sees it; ApprovalNotFound for anyone else."""
    principal = signed_in.principal
    approval = approvals.for_decider(session, principal, member=signed_in.member, approval_id=approval_id)
    decider = approvals.decider_email(session, principal, approval)
    ended = decisions.ended_by_disabling(session, principal, among=[approval])
    handed = decisions.handed_to_agent(session, principal, among=[approval])
    agent = get_agent(session, principal, approval.agent_id)
    return _view(
        approval, agent, now, decider, agent_disabled=approval.id in ended, handed_over=approval.id in handed
    )


async def show(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member
    approval_id = _approval_id(visit)
    now = services.clock.now()

    try:
        view = await services.db.reading(_approval_view, signed_in, approval_id, now)
    except ApprovalNotFound:
        return visit.message(
            "No approval here",
            "There is no approval at this address that you may decide. Only owners, admins and "
            "approvers of the payment's organisation can see it.",
            status=404,
            link=("/admin", "Go to the home page"),
        )
    return visit.render(
        "approval.html",
        {
            "title": f"Approve {view.amount_usd} USD to {view.host}?" if view.pending else view.outcome,
            "nav": "approvals",
            "approval": view,
            "notice": _notice(visit.request.query_params.get("done", ""), view),
        },
    )


def _notice(done: str, view: ApprovalView) -> str | None:
    """What the page says after a decision, true of the approval as it is now."""
    if done == "approved" and view.status == ApprovalStatus.CONSUMED:
        return PAID
    return DONE.get(done)


async def decision_options(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    approval_id = _approval_id(visit)
    approve = decision_of(body, no="deny")

    ceremony = await services.db.writing(
        approvals.start_decision,
        signed_in.principal,
        member=signed_in.member,
        approval_id=approval_id,
        approve=approve,
        rp=services.relying_party,
        now=services.clock.now(),
    )
    return visit.json(options_answer(visit, ceremony))


async def decision_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    approval_id = _approval_id(visit)
    approve = decision_of(body, no="deny")
    purpose = ChallengePurpose.APPROVE_PAYMENT if approve else ChallengePurpose.DENY_PAYMENT

    # Used up in its own transaction: a failed answer cannot be tried again with this nonce.
    challenge = await services.db.writing(
        claim_challenge, body.get("challengeId"), purpose=purpose, now=services.clock.now()
    )
    approval, _ = await services.db.writing(
        decisions.decide_with_passkey,
        signed_in.principal,
        member=signed_in.member,
        approval_id=approval_id,
        challenge=challenge,
        credential=body.get("credential"),
        rp=services.relying_party,
        now=services.clock.now(),
    )
    return visit.json({"redirect": f"{PATH}/{approval.id}?done={approval.status}"})
