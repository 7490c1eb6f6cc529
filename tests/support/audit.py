"""What someone with write access to the database could do to the audit log: drop the triggers
that make it append-only (an owner of the table can), edit, delete and reorder rows, and rewrite
hashes with what they can compute (plain SHA-256, or an HMAC under a key they guess)."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import delete, text, update
from sqlmodel import Session, col, select

from server.audit.hash_chain import GENESIS, event_body, keyed_hash, plain_hash
from server.models import AuditEvent

DROP_TRIGGERS = {
    "sqlite": ["DROP TRIGGER audit_events_no_update", "DROP TRIGGER audit_events_no_delete"],
    "postgresql": [
        "DROP TRIGGER audit_events_no_update ON audit_events",
        "DROP TRIGGER audit_events_no_truncate ON audit_events",
    ],
}


def drop_append_only_triggers(session: Session) -> None:
    for statement in DROP_TRIGGERS[session.get_bind().dialect.name]:
        session.execute(text(statement))


def body_of(event: AuditEvent) -> bytes:
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


def chain(session: Session, org_id: str) -> list[AuditEvent]:
    return list(
        session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq)))
    )


def rehash(
    session: Session,
    org_id: str,
    *,
    from_seq: int,
    to_seq: int | None = None,
    digest: Callable[[bytes], str] = plain_hash,
) -> None:
    """Recompute hashes and links from `from_seq` (to `to_seq`), as a forger would after an edit."""
    prev = GENESIS
    for event in chain(session, org_id):
        if event.seq >= from_seq and (to_seq is None or event.seq <= to_seq):
            event.prev_hash = prev
            event.hash = digest(body_of(event))
            session.add(event)
            session.flush()
        prev = event.hash


def under(key: bytes) -> Callable[[bytes], str]:
    return lambda body: keyed_hash(key, body)


def edit(session: Session, org_id: str, seq: int, data: dict[str, object]) -> None:
    session.execute(
        update(AuditEvent)
        .where(col(AuditEvent.org_id) == org_id, col(AuditEvent.seq) == seq)
        .values(data=data)
    )


def remove(session: Session, org_id: str, *, seq_at_least: int, seq_at_most: int | None = None) -> None:
    clauses = [col(AuditEvent.org_id) == org_id, col(AuditEvent.seq) >= seq_at_least]
    if seq_at_most is not None:
        clauses.append(col(AuditEvent.seq) <= seq_at_most)
    session.execute(delete(AuditEvent).where(*clauses))


def swap(session: Session, org_id: str, first: int, second: int) -> None:
    """Exchange two events' places in the chain (their sequence numbers)."""
    for old, new in ((first, -1), (second, first), (-1, second)):
        session.execute(
            update(AuditEvent)
            .where(col(AuditEvent.org_id) == org_id, col(AuditEvent.seq) == old)
            .values(seq=new)
        )


def add_plain_event(session: Session, event: AuditEvent) -> AuditEvent:
    """Append an event hashed the way events were before the chain was keyed."""
    event.hash = plain_hash(body_of(event))
    session.add(event)
    session.flush()
    return event
