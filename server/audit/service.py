"""Append audit events and verify each organisation's hash chain.

Each event stores the SHA-256 of its canonical JSON (which includes the previous event's hash),
so editing or deleting any event breaks every link after it. Appends lock the organisation for
the rest of the transaction so two writers can never claim the same sequence number.
Secrets, keys, signatures and request or response bodies are never written: `record` refuses
data that carries them.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

from sqlmodel import Session

from server.audit.repository import AuditRepository
from server.kit.clock import isoformat
from server.kit.db import lock_org
from server.kit.ids import new_id
from server.kit.jsonutil import canonical
from server.models import AuditEvent

GENESIS = "0" * 64

_FORBIDDEN_KEYS = {"token", "secret", "signature", "privatekey", "private_key", "key", "body", "password"}
_SECRET_VALUE = re.compile(
    r"(pw_(at|rt|cs)_[A-Za-z0-9_-]{20,})|((?<![0-9a-fA-F])(0x)?[0-9a-fA-F]{64}(?![0-9a-fA-F]))"
)


class AuditDataError(ValueError):
    """Audit data that would leak a secret or a body."""


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


def event_hash(event: AuditEvent) -> str:
    body = {
        "orgId": event.org_id,
        "seq": event.seq,
        "type": event.type,
        "actor": event.actor,
        "agentId": event.agent_id,
        "subjectId": event.subject_id,
        "data": event.data,
        "createdAt": isoformat(event.created_at),
        "prevHash": event.prev_hash,
    }
    return hashlib.sha256(canonical(body).encode()).hexdigest()


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
    lock_org(session, org_id)
    events = AuditRepository(session)
    last = events.last_of_org(org_id)
    event = AuditEvent(
        id=new_id("event"),
        org_id=org_id,
        seq=(last.seq + 1) if last else 1,
        type=type,
        actor=actor,
        agent_id=agent_id,
        subject_id=subject_id,
        data=data,
        created_at=now,
        prev_hash=last.hash if last else GENESIS,
        hash="",
    )
    event.hash = event_hash(event)
    return events.add(event)


def first_broken_link(session: Session, org_id: str) -> AuditEvent | None:
    """The first event whose hash or link does not check out, or None if the chain is intact."""
    prev = GENESIS
    expected_seq = 1
    for event in AuditRepository(session).chain_of_org(org_id):
        if event.seq != expected_seq or event.prev_hash != prev or event_hash(event) != event.hash:
            return event
        prev = event.hash
        expected_seq += 1
    return None


def events_for(session: Session, org_id: str, *, limit: int = 100) -> list[AuditEvent]:
    """The organisation's newest events, newest first."""
    return list(AuditRepository(session).newest_of_org(org_id, limit=limit))
