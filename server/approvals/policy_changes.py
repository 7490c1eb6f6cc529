"""Policy changes an agent asks for (request_policy_change): stored, read and expired; never made.

An agent that meets its limits asks a person for more room with the exact change and a short
note. `ask_for_change` checks that every part of the change gives more room than the policy and
rules in force, and stores it as canonical JSON with its SHA-256 for `REQUEST_TTL`, at most
`MAX_OPEN_PER_AGENT` waiting per agent; asking again for a change that already waits returns that
request. The note is the agent's words, so untrusted: it is refused when it is not plain text of
at most `MAX_NOTE` characters, or when it holds something shaped like a credential, and everything
that shows it fences and labels it. Nothing here changes a policy or a rule: only an owner's or
admin's passkey decision does (server/approvals/policy_change_decisions.py). Expiry is computed on
every read (`effective_status`) and written down by a background job with its audit event.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from auth.principal import Principal
from server.approvals.confirmation import change_hash
from server.approvals.errors import InvalidPolicyChange, PolicyChangeNotFound, PolicyChangeQueueFull
from server.approvals.repository import PolicyChangeRepository
from server.audit.service import record as audit
from server.kit.clock import Clock
from server.kit.credentials import contains_credential
from server.kit.db import Database, lock_org
from server.kit.errors import InputReason, InvalidInput
from server.kit.ids import new_id
from server.models import Member, PolicyChangeRequest
from server.policy.requested_changes import ChangeRequestError, RequestedChange, parse_requested_change
from server.policy.rulebook import rules_for_agent
from server.policy.service import current_policy
from server.tenancy.changes import canonical
from server.tenancy.service import get_agent
from server.vocabulary import PolicyChangeStatus, Role

REQUEST_TTL = timedelta(hours=24)
MAX_OPEN_PER_AGENT = 5
MAX_NOTE = 280
EXPIRY_BATCH = 200
PATH = "/policy-changes"
DECIDERS = frozenset({Role.OWNER, Role.ADMIN})
# Control and invisible formatting characters (bidirectional overrides among them) could make a
# note read on a page otherwise than it was written; a line break is the one allowed.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def manage_url(public_url: str, request_id: str) -> str:
    return f"{public_url}{PATH}/{request_id}"


def clean_note(note: object) -> str:
    """The agent's note as kept: plain text, line breaks as `\\n`, 1 to MAX_NOTE characters."""
    if not isinstance(note, str):
        raise InvalidInput(InputReason.INVALID_NOTE)
    text = note.replace("\r\n", "\n").replace("\r", "\n").strip()
    if not 1 <= len(text) <= MAX_NOTE:
        raise InvalidInput(InputReason.INVALID_NOTE)
    if any(char != "\n" and unicodedata.category(char) in _REFUSED_CATEGORIES for char in text):
        raise InvalidInput(InputReason.INVALID_NOTE)
    if contains_credential(text):
        raise InvalidInput(InputReason.CONTAINS_CREDENTIAL)
    return text


def invalid(error: ChangeRequestError) -> InvalidPolicyChange:
    return InvalidPolicyChange(reason=str(error.reason), fields=list(error.fields))


def requested(row: PolicyChangeRequest) -> RequestedChange:
    """The change a request stores, read back (it was canonical when it was stored)."""
    return parse_requested_change(json.loads(row.change_json)["change"])


def ask_for_change(
    session: Session,
    principal: Principal,
    *,
    agent_id: str,
    change: RequestedChange,
    note: object,
    now: datetime,
) -> tuple[PolicyChangeRequest, bool]:
    """Store what the agent asked for, to wait for a person; the request, and whether it is new
    (False: the same change already waits, and that request is returned)."""
    text_note = clean_note(note)
    agent = get_agent(session, principal, agent_id)
    lock_org(session, agent.org_id)  # counted and compared under the lock: five means five
    policy = current_policy(session, agent)
    try:
        change.check_wider(policy, {rule.id: rule for rule in rules_for_agent(session, agent, now=now)})
    except ChangeRequestError as exc:
        raise invalid(exc) from exc
    text = canonical({"orgId": agent.org_id, "agentId": agent.id, "change": change.document()})
    digest = change_hash(text)
    requests = PolicyChangeRepository(session)
    waiting = requests.open_of_agent(principal, org_id=agent.org_id, agent_id=agent.id, now=now)
    for row in waiting:
        if row.change_hash == digest:
            return row, False
    if len(waiting) >= MAX_OPEN_PER_AGENT:
        raise PolicyChangeQueueFull(max=MAX_OPEN_PER_AGENT)
    row = PolicyChangeRequest(
        id=new_id("policy_change"),
        org_id=agent.org_id,
        agent_id=agent.id,
        status=PolicyChangeStatus.PENDING,
        asked_by=principal.actor,
        note=text_note,
        change_json=text,
        change_hash=digest,
        policy_version=policy.version,
        created_at=now,
        expires_at=now + REQUEST_TTL,
    )
    requests.add(row)
    audit(
        session,
        org_id=row.org_id,
        type="policy_change.requested",
        actor=principal.actor,
        agent_id=row.agent_id,
        subject_id=row.id,
        data={
            "policyChangeId": row.id,
            "change": change.document(),
            "policyVersion": policy.version,
            "tokenId": principal.token_id,
            # The agent's words: kept apart and marked, never read as Paywarden's own.
            "note": {"untrusted": True, "text": text_note},
        },
        now=now,
    )
    return row, True


def effective_status(row: PolicyChangeRequest, now: datetime) -> PolicyChangeStatus:
    """The status as of `now`: a pending request past its time is expired before the job says so."""
    if row.status == PolicyChangeStatus.PENDING and now >= row.expires_at:
        return PolicyChangeStatus.EXPIRED
    return row.status


@dataclass(frozen=True)
class RequestView:
    """A request and its status as of when it was read."""

    request: PolicyChangeRequest
    status: PolicyChangeStatus


def view_of(row: PolicyChangeRequest, now: datetime) -> RequestView:
    return RequestView(row, effective_status(row, now))


def get_request(session: Session, principal: Principal, request_id: str) -> PolicyChangeRequest:
    """One request the principal may read (an agent reads only its own), or PolicyChangeNotFound."""
    row = (
        PolicyChangeRepository(session).get_readable(principal, request_id) if len(request_id) <= 40 else None
    )
    if row is None:
        raise PolicyChangeNotFound()
    return row


def request_status(session: Session, principal: Principal, request_id: str, *, now: datetime) -> RequestView:
    return view_of(get_request(session, principal, request_id), now)


def may_decide(member: Member) -> bool:
    """Owners and admins, who may change an agent's policy, decide; everyone else only sees."""
    return member.disabled_at is None and member.role in DECIDERS


def for_member(
    session: Session, principal: Principal, *, member: Member, request_id: str
) -> PolicyChangeRequest:
    """A request of `member`'s organisation: every member sees it. Anyone else learns nothing."""
    if member.disabled_at is not None or principal.member_id != member.id:
        raise PolicyChangeNotFound()
    row = get_request(session, principal, request_id)
    if row.org_id != member.org_id:
        raise PolicyChangeNotFound()
    return row


def waiting_in_org(
    session: Session, principal: Principal, *, member: Member, now: datetime
) -> list[PolicyChangeRequest]:
    """The organisation's requests waiting for a decision, oldest first."""
    return list(PolicyChangeRepository(session).pending(principal, org_id=member.org_id, now=now))


def latest_in_org(
    session: Session, principal: Principal, *, member: Member, agent_id: str | None = None, limit: int = 50
) -> list[PolicyChangeRequest]:
    """The organisation's requests (or one agent's), newest first, whatever became of them."""
    return newest_of_org(session, principal, org_id=member.org_id, agent_id=agent_id, limit=limit)


def newest_of_org(
    session: Session, principal: Principal, *, org_id: str, agent_id: str | None, limit: int
) -> list[PolicyChangeRequest]:
    """`org_id`'s requests (or one of its agents'), newest first; another organisation's agent is
    AgentNotFound."""
    if agent_id is not None:
        get_agent(session, principal, agent_id)
    return list(
        PolicyChangeRepository(session).newest(principal, org_id=org_id, agent_id=agent_id, limit=limit)
    )


def expire_lapsed_changes(session: Session, *, actor: str, now: datetime) -> list[PolicyChangeRequest]:
    """Write down the expiry of requests nobody decided in time (nothing changes)."""
    requests = PolicyChangeRepository(session)
    expired = []
    for row in requests.lapsed(now=now, limit=EXPIRY_BATCH):
        lock_org(session, row.org_id)
        requests.refresh(row)
        if (
            row.status != PolicyChangeStatus.PENDING
            or effective_status(row, now) != PolicyChangeStatus.EXPIRED
        ):
            continue
        row.status = PolicyChangeStatus.EXPIRED
        requests.add(row)
        audit(
            session,
            org_id=row.org_id,
            type="policy_change.expired",
            actor=actor,
            agent_id=row.agent_id,
            subject_id=row.id,
            data={"policyChangeId": row.id},
            now=now,
        )
        expired.append(row)
    return expired


def end_for_disabled_agent(
    session: Session, principal: Principal, *, agent_id: str, org_id: str, actor: str, now: datetime
) -> list[PolicyChangeRequest]:
    """A disabled agent's waiting requests end rejected, with no member behind the decision (a
    member's rejection always names one): nothing a stopped agent asked for stays open for a
    person to approve by habit. The caller holds the organisation's lock."""
    requests = PolicyChangeRepository(session)
    ended = list(requests.open_of_agent(principal, org_id=org_id, agent_id=agent_id, now=now))
    for row in ended:
        row.status = PolicyChangeStatus.REJECTED
        row.decided_at = now
        requests.add(row)
        audit(
            session,
            org_id=row.org_id,
            type="policy_change.rejected",
            actor=actor,
            agent_id=row.agent_id,
            subject_id=row.id,
            data={"policyChangeId": row.id, "reason": "agent_disabled"},
            now=now,
        )
    return ended


class ExpirePolicyChanges:
    """The background job that writes down lapsed policy change requests."""

    name = "policy_changes.expire"
    interval_seconds = 60.0
    actor = "system:policy-changes"

    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def run_once(self) -> int:
        return len(await self._db.writing(expire_lapsed_changes, actor=self.actor, now=self._clock.now()))
