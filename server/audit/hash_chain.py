"""How an audit event is hashed, in one place (the service and the migration that keyed the chain
both use it).

An event's hash covers its canonical body, which includes the previous event's hash. Since the
chain was keyed, the hash is an HMAC-SHA256 under a key derived from the master key: someone who
can write to the database but does not hold the master key cannot recompute it after an edit.
Events written before (plain SHA-256) stay as they were; the migration that keyed the chain
appended one keyed `audit.keyed` event to each organisation's chain naming the last of them, so
they are covered as a whole by a hash no one without the key can forge.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Any

from server.kit.clock import isoformat
from server.kit.crypto import MasterKey
from server.kit.jsonutil import canonical

GENESIS = "0" * 64
CHAIN_KEY_PURPOSE = "paywarden/audit-chain/v1"
ANCHOR_TYPE = "audit.keyed"
ANCHOR_ACTOR = "system:migration"


def chain_key(master: MasterKey) -> bytes:
    return master.derive(CHAIN_KEY_PURPOSE)


def event_body(
    *,
    org_id: str,
    seq: int,
    type: str,
    actor: str,
    agent_id: str | None,
    subject_id: str | None,
    data: dict[str, Any],
    created_at: datetime,
    prev_hash: str,
) -> bytes:
    return canonical(
        {
            "orgId": org_id,
            "seq": seq,
            "type": type,
            "actor": actor,
            "agentId": agent_id,
            "subjectId": subject_id,
            "data": data,
            "createdAt": isoformat(created_at),
            "prevHash": prev_hash,
        }
    ).encode()


def keyed_hash(key: bytes, body: bytes) -> str:
    return hmac.new(key, body, hashlib.sha256).hexdigest()


def plain_hash(body: bytes) -> str:
    """How events were hashed before the chain was keyed; never used for a new event."""
    return hashlib.sha256(body).hexdigest()


def anchor_data(*, legacy_seq: int, legacy_hash: str) -> dict[str, Any]:
    return {"legacySeq": legacy_seq, "legacyHash": legacy_hash}
