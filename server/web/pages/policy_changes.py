"""/policy-changes/{id}: a policy change an agent asked for, and an owner's or admin's decision.

Every member of the agent's organisation sees the request: what would change, from what to what,
the agent's note (its own words, untrusted: shown as plain text in a box that says so), and what
became of it. Owners and admins, who may change an agent's policy, approve or reject it, each
with a fresh passkey assertion, user verified, over a challenge that commits to that decision, the
change's hash and the versions it would change (server/approvals/policy_change_decisions.py).
Anyone of another organisation gets the same "nothing here" page whether it exists or not. An
agent's token opens nothing here: the pages read only the member's session cookie.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session
from starlette.responses import Response

from auth.principal import Principal
from auth.sessions import SignedIn
from server.approvals import policy_change_decisions as decisions
from server.approvals import policy_changes
from server.approvals.confirmation import change_hash
from server.approvals.errors import PolicyChangeNotFound
from server.approvals.policy_change_words import Line, asked_words, lines_of
from server.models import Member, PolicyChangeRequest
from server.policy.rulebook import rules_for_agent
from server.policy.service import current_policy
from server.tenancy.service import MemberNotFound, find_member, get_agent
from server.vocabulary import PolicyChangeStatus
from server.web.pages.ceremonies import claimed, decision_of, options_answer, read_answer
from server.web.pages.common import Visit

PATH = policy_changes.PATH
INBOX = "/approvals?tab=policy-changes"
DONE = {
    "approved": "You approved this change. It is in force now, and the agent may try again.",
    "rejected": "You rejected this change. Nothing changed.",
}


def _when(moment: datetime) -> str:
    return f"{moment.strftime('%Y-%m-%d %H:%M')} UTC"


def _time_left(expires_at: datetime, now: datetime) -> str:
    minutes = max(0, int((expires_at - now).total_seconds() + 59) // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min left" if hours else f"{minutes} min left"


def outcome(row: PolicyChangeRequest, status: PolicyChangeStatus, decider: str | None) -> str | None:
    """What became of a request, as its page's heading says it; None while it waits."""
    who = decider or "a member"
    when = _when(row.decided_at) if row.decided_at is not None else None
    if status == PolicyChangeStatus.APPROVED:
        made = (
            f"the agent's policy is now version {row.applied_version}"
            if row.applied_version
            else "the rules changed"
        )
        return f"Approved by {who} at {when}: {made}"
    if status == PolicyChangeStatus.REJECTED and row.decided_by is None:
        return f"Closed at {when}, when the agent was disabled: nothing changed"
    if status == PolicyChangeStatus.REJECTED:
        return f"Rejected by {who} at {when}: nothing changed"
    if status == PolicyChangeStatus.EXPIRED:
        return f"Nobody decided by {_when(row.expires_at)}: nothing changed"
    return None


@dataclass(frozen=True)
class ChangeView:
    """A request as a member sees it; every string is rendered as plain, escaped text."""

    id: str
    status: str
    agent: str
    summary: str  # the change in one line, as asked
    lines: list[Line]
    note: str
    created_at: datetime
    expires_at: datetime
    time_left: str
    policy_version: int  # when the agent asked
    policy_version_now: int | None  # while it waits
    basis: str | None  # the versions the page shows, which a decision must still find
    may_decide: bool
    approvable: bool  # it still gives more room than the agent has now
    altered: bool  # the stored change is not the one the agent asked for
    outcome: str | None

    @property
    def pending(self) -> bool:
        return self.status == PolicyChangeStatus.PENDING


def _decider_email(session: Session, principal: Principal, row: PolicyChangeRequest) -> str | None:
    if row.decided_by is None:
        return None
    try:
        return find_member(session, principal, row.decided_by, org_id=row.org_id).email
    except MemberNotFound:
        return None


def change_view(
    session: Session, principal: Principal, member: Member, row: PolicyChangeRequest, now: datetime
) -> ChangeView:
    """The request as `member` sees it now: while it waits, against the policy in force."""
    status = policy_changes.effective_status(row, now)
    agent = get_agent(session, principal, row.agent_id)
    altered = change_hash(row.change_json) != row.change_hash
    change = policy_changes.requested(row)
    waiting = status == PolicyChangeStatus.PENDING
    policy = current_policy(session, agent) if waiting else None
    rules = {rule.id: rule for rule in rules_for_agent(session, agent, now=now)} if waiting else {}
    return ChangeView(
        id=row.id,
        status=str(status),
        agent=agent.name,
        summary=asked_words(change),
        lines=lines_of(change, policy, rules),
        note=row.note,
        created_at=row.created_at,
        expires_at=row.expires_at,
        time_left=_time_left(row.expires_at, now),
        policy_version=row.policy_version,
        policy_version_now=policy.version if policy else None,
        basis=decisions.basis_of(session, agent, change, now=now) if waiting else None,
        may_decide=policy_changes.may_decide(member),
        approvable=waiting and not altered and decisions.still_wider(session, agent, change, now=now),
        altered=altered,
        outcome=outcome(row, status, _decider_email(session, principal, row)),
    )


def _page_view(session: Session, signed_in: SignedIn, request_id: str, now: datetime) -> ChangeView:
    row = policy_changes.for_member(
        session, signed_in.principal, member=signed_in.member, request_id=request_id
    )
    return change_view(session, signed_in.principal, signed_in.member, row, now)


def waiting_views(session: Session, signed_in: SignedIn, now: datetime) -> list[ChangeView]:
    """The organisation's requests waiting for a decision, oldest first (the inbox, the overview)."""
    principal, member = signed_in.principal, signed_in.member
    rows = policy_changes.waiting_in_org(session, principal, member=member, now=now)
    return [change_view(session, principal, member, row, now) for row in rows]


def latest_views(
    session: Session, signed_in: SignedIn, now: datetime, *, agent_id: str | None = None, limit: int = 50
) -> list[ChangeView]:
    """The organisation's latest requests (or one agent's), newest first, whatever became of them."""
    principal, member = signed_in.principal, signed_in.member
    rows = policy_changes.latest_in_org(session, principal, member=member, agent_id=agent_id, limit=limit)
    return [change_view(session, principal, member, row, now) for row in rows]


def _request_id(visit: Visit) -> str:
    request_id = str(visit.request.path_params["request_id"])
    if not request_id.startswith("pcr_") or len(request_id) > 40:
        raise PolicyChangeNotFound()
    return request_id


async def show(visit: Visit) -> Response:
    services = visit.services
    try:
        view = await services.db.reading(_page_view, visit.member, _request_id(visit), services.clock.now())
    except PolicyChangeNotFound:
        return visit.message(
            "No policy change here",
            "There is no policy change request at this address in your organisation.",
            status=404,
            link=("/admin", "Go to the home page"),
        )
    return visit.render(
        "policy_change.html",
        {
            "title": f"Change what agent {view.agent} may pay?" if view.pending else view.outcome,
            "nav": "approvals",
            "change": view,
            "notice": DONE.get(visit.request.query_params.get("done", "")),
        },
    )


async def decision_options(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    ceremony = await services.db.writing(
        decisions.start_change_decision,
        signed_in.principal,
        member=signed_in.member,
        request_id=_request_id(visit),
        approve=decision_of(body, no="reject"),
        seen_basis=body.get("basis"),
        rp=services.relying_party,
        now=services.clock.now(),
    )
    return visit.json(options_answer(visit, ceremony))


async def decision_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    request_id = _request_id(visit)
    # Used up in its own unit of work: a failed answer cannot be tried again with this nonce.
    challenge = await claimed(visit, body, decisions.PURPOSES[decision_of(body, no="reject")])
    row = await services.db.writing(
        decisions.decide_change_with_passkey,
        signed_in.principal,
        member=signed_in.member,
        request_id=request_id,
        challenge=challenge,
        credential=body.get("credential"),
        rp=services.relying_party,
        now=services.clock.now(),
    )
    return visit.json({"redirect": f"{PATH}/{row.id}?done={row.status}"})
