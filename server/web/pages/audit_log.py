"""/admin/audit: the organisation's audit log, newest first, a page at a time (a cursor: the
sequence number of the last event shown), filtered by kind, agent, member and dates; each
approval decision names the member and the passkey behind it. The hash chain's verification
state is shown at the top (server/audit/service.py, `first_broken_link`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from sqlmodel import Session
from starlette.responses import Response

from auth.sessions import SignedIn
from server.approvals.policy_change_words import document_words
from server.audit.service import ChainBreak, events_page, first_broken_link
from server.kit.errors import InputReason, InvalidInput
from server.models import AuditEvent
from server.tenancy.service import agents, find_org, members
from server.web.pages.common import Visit

PATH = "/admin/audit"
PAGE = 50
KINDS = (
    ("approval.", "Approval decisions"),
    ("payment.", "Payments"),
    ("member.", "Members"),
    ("passkey.", "Passkeys"),
    ("agent.", "Agents"),
    ("token.", "Agent tokens"),
    ("oauth.", "Connections"),
    ("org.", "Organisation settings"),
    ("team.", "Teams"),
    ("wallet.", "Wallets"),
    ("policy_change.", "Policy changes agents asked for"),
)
BREAKS = {
    "sequence_gap": "an event is missing",
    "link_mismatch": "an event does not follow the one before it",
    "hash_mismatch": "an event was changed after it was written",
    "not_keyed": "an event is not sealed with this server's key",
    "truncated": "events at the end were removed",
    "head_mismatch": "the newest event is not the one recorded",
}


@dataclass(frozen=True)
class Filters:
    kind: str | None = None
    agent_id: str | None = None
    member_id: str | None = None
    since: date | None = None
    until: date | None = None
    before_seq: int | None = None

    def query(self, **changes: Any) -> str:
        """The page's query string with these filters (and `changes`), for links."""
        values = {
            "kind": self.kind,
            "agent": self.agent_id,
            "member": self.member_id,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "before": self.before_seq,
            **changes,
        }
        return urlencode({key: value for key, value in values.items() if value not in (None, "")})


@dataclass(frozen=True)
class EventView:
    seq: int
    kind: str
    when: datetime
    who: str
    agent: str | None
    subject: str | None
    passkey: str | None  # the passkey behind an approval decision: its name and credential
    details: list[tuple[str, str]]
    note: str | None  # the note an agent wrote with a policy change request: its words, untrusted


@dataclass(frozen=True)
class AuditPage:
    events: list[EventView]
    next_before: int | None
    broken: ChainBreak | None
    agents: list[tuple[str, str]]
    members: list[tuple[str, str]]


def _date(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput(InputReason.INVALID_AUDIT_FILTER) from exc


def _filters(params: Any) -> Filters:
    kind = params.get("kind") or None
    if kind is not None and (len(kind) > 60 or not kind.replace(".", "").replace("_", "").isalnum()):
        raise InvalidInput(InputReason.INVALID_AUDIT_FILTER)
    before = params.get("before") or None
    if before is not None and (not before.isdigit() or len(before) > 12):
        raise InvalidInput(InputReason.INVALID_AUDIT_FILTER)
    agent_id = params.get("agent") or None
    member_id = params.get("member") or None
    for ref in (agent_id, member_id):
        if ref is not None and len(ref) > 40:
            raise InvalidInput(InputReason.INVALID_AUDIT_FILTER)
    return Filters(
        kind=kind,
        agent_id=agent_id,
        member_id=member_id,
        since=_date(params.get("since")),
        until=_date(params.get("until")),
        before_seq=int(before) if before else None,
    )


def _start_of(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


SHOWN_DATA = (
    "amountUsd",
    "host",
    "reason",
    "from",
    "to",
    "name",
    "role",
    "scopes",
    "approvalTtlSeconds",
    "slackWebhook",
)


def _view(event: AuditEvent, emails: dict[str, str], agent_names: dict[str, str]) -> EventView:
    data = event.data
    who = event.actor
    if who.startswith("member:"):
        who = emails.get(who.removeprefix("member:"), who)
    elif who.startswith("agent:"):
        who = f"agent {agent_names.get(who.removeprefix('agent:'), who.removeprefix('agent:'))}"
    passkey = None
    if event.type.startswith(("approval.", "policy_change.")) and data.get("passkeyId"):
        credential = str(data.get("credentialId") or "")
        short = f"{credential[:10]}…" if len(credential) > 10 else credential
        passkey = f"{data.get('passkeyName') or 'a passkey'} (credential {short})"
    subject = event.subject_id
    if subject in emails:
        subject = emails[subject]
    details = [(key, str(data[key])) for key in SHOWN_DATA if key in data and data[key] not in (None, "")]
    note = data.get("note")
    if event.type.startswith("policy_change."):
        details += _change_details(data)
    return EventView(
        seq=event.seq,
        kind=event.type,
        when=event.created_at,
        who=who,
        agent=agent_names.get(event.agent_id or "", event.agent_id),
        subject=subject,
        passkey=passkey,
        details=details,
        note=str(note.get("text")) if isinstance(note, dict) and note.get("untrusted") else None,
    )


def _change_details(data: dict[str, Any]) -> list[tuple[str, str]]:
    """A policy change event's change in words, and the policy version it asked at or made."""
    words = document_words(data.get("change"))
    found = [] if words is None else [("change", words)]
    if data.get("policyVersion") is not None:
        found.append(("policyVersion", str(data["policyVersion"])))
    return found


def _audit_page(session: Session, signed_in: SignedIn, filters: Filters) -> AuditPage:
    principal = signed_in.principal
    org = find_org(session, principal, signed_in.member.org_id)
    people = members(session, principal, org_id=org.id)
    emails = {row.id: row.email for row in people}
    agent_names = {row.id: row.name for row in agents(session, principal, org_id=org.id)}
    rows = events_page(
        session,
        principal,
        org_id=org.id,
        kind=filters.kind,
        agent_id=filters.agent_id,
        actor=f"member:{filters.member_id}" if filters.member_id else None,
        since=_start_of(filters.since) if filters.since else None,
        until=_start_of(filters.until) + timedelta(days=1) if filters.until else None,
        before_seq=filters.before_seq,
        limit=PAGE + 1,
    )
    shown = rows[:PAGE]
    return AuditPage(
        events=[_view(row, emails, agent_names) for row in shown],
        next_before=shown[-1].seq if len(rows) > PAGE and shown else None,
        broken=first_broken_link(session, org.id),
        agents=sorted(((name, agent_id) for agent_id, name in agent_names.items())),
        members=sorted(((email, member_id) for member_id, email in emails.items())),
    )


async def show(visit: Visit) -> Response:
    signed_in = visit.member
    filters = _filters(visit.request.query_params)
    found = await visit.services.db.reading(_audit_page, signed_in, filters)
    broken = found.broken
    return visit.render(
        "audit.html",
        {
            "title": "Audit log",
            "nav": "audit",
            "page": found,
            "filters": filters,
            "kinds": KINDS,
            "broken_words": BREAKS.get(str(broken.reason), str(broken.reason)) if broken else None,
            "next_query": filters.query(before=found.next_before) if found.next_before else None,
            "first_query": filters.query(before=None) if filters.before_seq else None,
        },
    )
