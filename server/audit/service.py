"""Append audit events and verify each organisation's hash chain.

Each event stores the HMAC-SHA256 (under a key derived from the master key) of its canonical
JSON, which includes the previous event's hash: editing, deleting or reordering any event breaks
the chain at that event, and someone who can write to the database but does not hold the master
key cannot recompute the hashes after an edit (server/audit/hash_chain.py). The database refuses
UPDATE and DELETE on the table outright (triggers). Removing the newest events leaves a shorter
chain that checks out; that is caught against a head recorded earlier (`heads`, logged by the
server periodically, and `audit verify --expect-head`).
Appends lock the organisation for the rest of the transaction so two writers can never claim the
same sequence number. Secrets, keys, signatures and request or response bodies are never written:
`record` refuses data that carries them. An event written while serving an HTTP request carries
that request's id in its data (`requestId`), covered by the hash like everything else.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlmodel import Session

from server.audit.hash_chain import ANCHOR_TYPE, GENESIS, anchor_data, event_body, keyed_hash, plain_hash
from server.audit.repository import AuditRepository
from server.kit.db import audit_key_of
from server.kit.ids import new_id
from server.kit.repository import Reader
from server.kit.request_ids import current_request_id
from server.models import AuditEvent

_FORBIDDEN_KEYS = {"token", "secret", "signature", "privatekey", "private_key", "key", "body", "password"}
_SECRET_VALUE = re.compile(
    r"(pw_(at|rt|cs)_[A-Za-z0-9_-]{20,})|((?<![0-9a-fA-F])(0x)?[0-9a-fA-F]{64}(?![0-9a-fA-F]))"
)


class AuditDataError(ValueError):
    """Audit data that would leak a secret or a body."""


class AuditKeyMissing(RuntimeError):
    """The unit of work has no audit key: the process never checked its master key."""


BreakReason = Literal[
    "sequence_gap",  # an event is missing or out of place (deleted, inserted, reordered)
    "link_mismatch",  # the event does not follow the one before it
    "hash_mismatch",  # the event is not what was written (edited)
    "not_keyed",  # a plain SHA-256 hash where only a keyed one can be: rewritten without the key
    "truncated",  # the chain ends below a head recorded earlier
    "head_mismatch",  # the event at a head recorded earlier is another one now
]


@dataclass(frozen=True)
class Head:
    """The newest event of an organisation's chain, as recorded to detect truncation later."""

    org_id: str
    seq: int
    hash: str


@dataclass(frozen=True)
class ChainBreak:
    org_id: str
    seq: int
    reason: BreakReason
    event_id: str | None = None
    last_seq: int | None = None  # for a truncation: where the chain ends now


def _check_clean(value: Any, path: str = "data") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower().replace("-", "") in _FORBIDDEN_KEYS:
                raise AuditDataError(f"{path}.{key} may not be audited")
            _check_clean(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_clean(item, f"{path}[{index}]")
    elif isinstance(value, str) and _SECRET_VALUE.search(value) and not _is_hash_field(path):
        raise AuditDataError(f"{path} looks like a secret")


def _is_hash_field(path: str) -> bool:
    # Transaction hashes and EIP-3009 nonces are public 32-byte values, not secrets.
    leaf = path.rsplit(".", 1)[-1].lower()
    return leaf in {"txhash", "transactionhash", "nonce", "fingerprint"}


def _key(session: Session) -> bytes:
    key = audit_key_of(session)
    if key is None:
        raise AuditKeyMissing("no audit key: the master key must be checked before anything is audited")
    return key


def _body(event: AuditEvent) -> bytes:
    return event_body(
        org_id=event.org_id,
        seq=event.seq,
        type=event.type,
        actor=event.actor,
        agent_id=event.agent_id,
        subject_id=event.subject_id,
        data=event.data,
        created_at=event.created_at,
        prev_hash=event.prev_hash,
    )


def event_hash(event: AuditEvent, key: bytes) -> str:
    return keyed_hash(key, _body(event))


def record(
    session: Session,
    *,
    org_id: str,
    type: str,
    actor: str,
    data: dict[str, Any],
    now: datetime,
    agent_id: str | None = None,
    subject_id: str | None = None,
) -> AuditEvent:
    _check_clean(data)
    # The request that wrote the event, inside the hashed data: tamper-evident like the rest.
    request_id = current_request_id()
    if request_id is not None and "requestId" not in data:
        data = {**data, "requestId": request_id}
    key = _key(session)
    events = AuditRepository(session)
    for _ in range(2):  # a head moved under a rolled-back savepoint is read again, once
        seq, prev_hash = events.head(org_id)
        event = AuditEvent(
            id=new_id("event"),
            org_id=org_id,
            seq=seq + 1,
            type=type,
            actor=actor,
            agent_id=agent_id,
            subject_id=subject_id,
            data=data,
            created_at=now,
            prev_hash=prev_hash,
            hash="",
        )
        event.hash = event_hash(event, key)
        if events.advance_head(org_id, seq=event.seq, event_hash=event.hash):
            return events.add(event)
    raise RuntimeError(f"the audit head of {org_id} moved while this transaction held it")


def head_seq(session: Session, org_id: str) -> int | None:
    """The seq of the organisation's newest event (None before its first): read before work done
    without the organisation's lock, to tell under the lock what was written meanwhile."""
    return AuditRepository(session).head_seq(org_id)


Written = Literal["nothing", "only", "other"]


def written_since(session: Session, org_id: str, seq: int, *, besides: str) -> Written:
    """What the organisation's events after `seq` are: none, only types starting with `besides`,
    or others too. Every write that changes a decision's inputs appends its event in its own
    transaction, so under the lock this names what changed since `seq` was read."""
    head, other = AuditRepository(session).since(org_id, seq, besides=besides)
    if other:
        return "other"
    return "nothing" if head == seq else "only"


def _anchors(event: AuditEvent, *, legacy_seq: int, legacy_hash: str) -> bool:
    """Whether `event` is the keyed anchor that covers plain-hashed events up to `legacy_seq`."""
    return event.type == ANCHOR_TYPE and event.data == anchor_data(
        legacy_seq=legacy_seq, legacy_hash=legacy_hash
    )


def first_broken_link(session: Session, org_id: str, *, expected: Head | None = None) -> ChainBreak | None:
    """The first place the organisation's chain does not check out, or None if it is intact.

    Events hashed with plain SHA-256 (written before the chain was keyed) are accepted only as the
    chain's beginning, followed by the keyed anchor that names the last of them. `expected`, a head
    recorded earlier, must still be in the chain: a chain that ends below it was truncated.
    """
    key = _key(session)
    prev, seq = GENESIS, 1
    keyed = False
    legacy_from: AuditEvent | None = None  # the first plain-hashed event not yet covered by an anchor
    hash_at_expected: str | None = None

    def broken(event: AuditEvent, reason: BreakReason) -> ChainBreak:
        return ChainBreak(org_id, event.seq, reason, event_id=event.id)

    for event in AuditRepository(session).chain_of_org(org_id):
        if event.seq != seq:
            return broken(event, "sequence_gap")
        if event.prev_hash != prev:
            return broken(event, "link_mismatch")
        body = _body(event)
        if hmac_equal(event.hash, keyed_hash(key, body)):
            if legacy_from is not None:
                if not _anchors(event, legacy_seq=seq - 1, legacy_hash=prev):
                    return broken(legacy_from, "not_keyed")
                legacy_from = None
            keyed = True
        elif hmac_equal(event.hash, plain_hash(body)):
            if keyed:
                return broken(event, "not_keyed")
            legacy_from = legacy_from or event
        else:
            return broken(event, "hash_mismatch")
        if expected is not None and event.seq == expected.seq:
            hash_at_expected = event.hash
        prev, seq = event.hash, seq + 1
    if legacy_from is not None:
        return broken(legacy_from, "not_keyed")
    if expected is not None:
        if seq - 1 < expected.seq:
            return ChainBreak(org_id, expected.seq, "truncated", last_seq=seq - 1)
        if hash_at_expected != expected.hash:
            return ChainBreak(org_id, expected.seq, "head_mismatch")
    return None


def events_page(
    session: Session,
    reader: Reader,
    *,
    org_id: str,
    kind: str | None = None,
    agent_id: str | None = None,
    since: datetime | None = None,
    before_seq: int | None = None,
    limit: int,
    actor: str | None = None,
    until: datetime | None = None,
) -> list[AuditEvent]:
    """A page of the organisation's audit events, newest first (see AuditRepository.page_of_org)."""
    found = AuditRepository(session).page_of_org(
        reader,
        org_id=org_id,
        kind=kind,
        agent_id=agent_id,
        since=since,
        before_seq=before_seq,
        limit=limit,
        actor=actor,
        until=until,
    )
    return list(found)


def hmac_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def newest_event_at(session: Session) -> datetime | None:
    """When the newest audit event of any organisation was written (None before the first)."""
    return AuditRepository(session).newest_created_at()


def heads(session: Session) -> list[Head]:
    """Every organisation's newest event (seq and hash), by organisation id."""
    return [Head(event.org_id, event.seq, event.hash) for event in AuditRepository(session).heads()]


def heads_document(found: list[Head]) -> dict[str, Any]:
    """Heads as `audit head --json` prints them and the server logs them; what --expect-head reads."""
    return {"heads": [{"orgId": head.org_id, "seq": head.seq, "hash": head.hash} for head in found]}


def parse_heads(document: Mapping[str, Any]) -> dict[str, Head]:
    """Heads from a document `heads_document` wrote (or a logged line carrying its `heads`)."""
    items = document.get("heads")
    if not isinstance(items, list):
        raise ValueError(
            "expected a JSON object with a list of heads, as `paywarden audit head --json` prints"
        )
    found: dict[str, Head] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ValueError("each head must be an object with orgId, seq and hash")
        org_id, seq, digest = item.get("orgId"), item.get("seq"), item.get("hash")
        if not isinstance(org_id, str) or not isinstance(seq, int) or not isinstance(digest, str):
            raise ValueError("each head must be an object with orgId, seq and hash")
        found[org_id] = Head(org_id, seq, digest)
    return found
