"""The audit chain is keyed and append-only.

From here on every audit event is hashed with an HMAC under a key derived from the master key.
Each organisation whose chain already holds events (hashed with plain SHA-256) gets one keyed
`audit.keyed` event naming its last such event, so those are covered by a hash no one without the
key can forge; this is why the migration needs the master key (`paywarden migrate` passes it).
Triggers then refuse UPDATE and DELETE on the audit table (and TRUNCATE, on PostgreSQL).

Revision ID: 20261130_0008
Revises: 20261130_0007
Create Date: 2026-11-30
"""

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import context, op

from server.audit.hash_chain import ANCHOR_ACTOR, ANCHOR_TYPE, anchor_data, event_body, keyed_hash
from server.kit.ids import new_id
from server.models.base import UTCDateTime

revision: str = "20261130_0008"
down_revision: str | None = "20261130_0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REFUSE = "audit events are append-only"

SQLITE_UP = [
    f"CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events "
    f"BEGIN SELECT RAISE(ABORT, '{REFUSE}'); END",
    f"CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events "
    f"BEGIN SELECT RAISE(ABORT, '{REFUSE}'); END",
]
SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS audit_events_no_update",
    "DROP TRIGGER IF EXISTS audit_events_no_delete",
]

POSTGRES_UP = [
    "CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
    f"BEGIN RAISE EXCEPTION '{REFUSE}' USING ERRCODE = 'insufficient_privilege'; END $$",
    "CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events "
    "FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()",
    "CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events "
    "FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only()",
]
POSTGRES_DOWN = [
    "DROP TRIGGER IF EXISTS audit_events_no_truncate ON audit_events",
    "DROP TRIGGER IF EXISTS audit_events_no_update ON audit_events",
    "DROP FUNCTION IF EXISTS audit_events_append_only()",
]

events = sa.table(
    "audit_events",
    sa.column("id", sa.String),
    sa.column("org_id", sa.String),
    sa.column("seq", sa.Integer),
    sa.column("type", sa.String),
    sa.column("actor", sa.String),
    sa.column("agent_id", sa.String),
    sa.column("subject_id", sa.String),
    sa.column("data", sa.JSON),
    sa.column("created_at", UTCDateTime()),
    sa.column("prev_hash", sa.String),
    sa.column("hash", sa.String),
)


def _anchor_existing_chains() -> None:
    bind = op.get_bind()
    newest = (
        sa.select(events.c.org_id.label("org"), sa.func.max(events.c.seq).label("last"))
        .group_by(events.c.org_id)
        .subquery("newest")
    )
    heads = bind.execute(
        sa.select(events).join(
            newest, sa.and_(events.c.org_id == newest.c.org, events.c.seq == newest.c.last)
        )
    ).all()
    if not heads:
        return
    key = context.config.attributes.get("audit_key")
    if not isinstance(key, bytes):
        raise RuntimeError(
            "this migration signs the existing audit chains with the master key: run `paywarden migrate`"
        )
    now = datetime.now(UTC)
    for head in heads:
        last = _body(head.org_id, head.seq, head.type, head.actor, head.agent_id, head.subject_id,
                     head.data, head.created_at, head.prev_hash)  # fmt: skip
        if keyed_hash(key, last) == head.hash:
            continue  # already keyed (the schema was stepped down and up again)
        data = anchor_data(legacy_seq=head.seq, legacy_hash=head.hash)
        body = _body(head.org_id, head.seq + 1, ANCHOR_TYPE, ANCHOR_ACTOR, None, None, data, now, head.hash)
        bind.execute(
            events.insert().values(
                id=new_id("event"),
                org_id=head.org_id,
                seq=head.seq + 1,
                type=ANCHOR_TYPE,
                actor=ANCHOR_ACTOR,
                agent_id=None,
                subject_id=None,
                data=data,
                created_at=now,
                prev_hash=head.hash,
                hash=keyed_hash(key, body),
            )
        )


def _body(
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
    return event_body(
        org_id=org_id,
        seq=seq,
        type=type,
        actor=actor,
        agent_id=agent_id,
        subject_id=subject_id,
        data=data,
        created_at=created_at,
        prev_hash=prev_hash,
    )


def upgrade() -> None:
    _anchor_existing_chains()
    for statement in POSTGRES_UP if op.get_bind().dialect.name == "postgresql" else SQLITE_UP:
        op.execute(statement)


def downgrade() -> None:
    # The anchors stay: they are events like any other, and keyed hashes still verify.
    for statement in POSTGRES_DOWN if op.get_bind().dialect.name == "postgresql" else SQLITE_DOWN:
        op.execute(statement)
