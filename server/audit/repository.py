"""Every query on the audit log: one hash chain of events per organisation, ordered by `seq`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import ClassVar

from sqlalchemy import and_, func, text
from sqlmodel import col, select

from server.audit.hash_chain import GENESIS
from server.kit.db import held_heads, locked_head
from server.kit.repository import Reader, TenantRepository
from server.models import AuditEvent, Organization


class AuditRepository(TenantRepository[AuditEvent]):
    model = AuditEvent
    agent_column: ClassVar[str | None] = "agent_id"

    def head(self, org_id: str) -> tuple[int, str]:
        """The organisation's newest event's `seq` and hash, its head row locked until the
        transaction ends (it is the organisation's lock, server/kit/db.py): events of one
        organisation append one at a time, in the order their transactions commit. A head this
        transaction already holds is not read again."""
        held = held_heads(self.session)
        if org_id not in held:
            found = locked_head(self.session, org_id)
            if found is None:  # the organisation's first event since heads were kept
                last = self.last_of_org(org_id)
                self.session.execute(
                    text(
                        "INSERT INTO audit_heads (org_id, seq, hash) VALUES (:org_id, :seq, :hash) "
                        "ON CONFLICT (org_id) DO NOTHING"
                    ),
                    {
                        "org_id": org_id,
                        "seq": last.seq if last else 0,
                        "hash": last.hash if last else GENESIS,
                    },
                )
                found = locked_head(self.session, org_id)
            assert found is not None
            held[org_id] = found
        return held[org_id]

    def advance_head(self, org_id: str, *, seq: int, event_hash: str) -> bool:
        """Move the head from `seq - 1` to the event appended; False, and nothing moved, when the
        head was not where this transaction last saw it (a savepoint rolled back since)."""
        moved = self.session.execute(
            text(
                "UPDATE audit_heads SET seq = :seq, hash = :hash WHERE org_id = :org_id AND seq = :previous"
            ),
            {"org_id": org_id, "seq": seq, "hash": event_hash, "previous": seq - 1},
        )
        held = held_heads(self.session)
        if moved.rowcount != 1:  # type: ignore[attr-defined]
            held.pop(org_id, None)
            return False
        held[org_id] = (seq, event_hash)
        return True

    def head_seq(self, org_id: str) -> int | None:
        row = self.session.execute(
            text("SELECT seq FROM audit_heads WHERE org_id = :org_id"), {"org_id": org_id}
        ).one_or_none()
        return None if row is None else int(row[0])

    def since(self, org_id: str, seq: int, *, besides: str) -> tuple[int | None, bool]:
        """The head's seq now, and whether an event after `seq` has a type not starting `besides`."""
        row = self.session.execute(
            text(
                "SELECT (SELECT seq FROM audit_heads WHERE org_id = :org_id), EXISTS ("
                "SELECT 1 FROM audit_events WHERE org_id = :org_id AND seq > :seq AND type NOT LIKE :prefix)"
            ),
            {"org_id": org_id, "seq": seq, "prefix": besides.replace("%", "") + "%"},
        ).one()
        return (None if row[0] is None else int(row[0])), bool(row[1])

    def last_of_org(self, org_id: str) -> AuditEvent | None:
        return self._first(
            self._statement().where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq).desc())
        )

    def chain_of_org(self, org_id: str) -> Iterator[AuditEvent]:
        """The organisation's events, first to last."""
        yield from self.session.exec(
            self._statement().where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq))
        )

    def page_of_org(
        self,
        reader: Reader,
        *,
        org_id: str,
        kind: str | None,
        agent_id: str | None,
        since: datetime | None,
        before_seq: int | None,
        limit: int,
        actor: str | None = None,
        until: datetime | None = None,
    ) -> Sequence[AuditEvent]:
        """The organisation's events, newest first: of one type (or a type's family, `agent.` for
        every `agent.*`), one agent, one actor (`member:mem_...`), from a time on and before
        another, below a sequence number."""
        statement = self.readable(reader).where(AuditEvent.org_id == org_id)
        if kind is not None:
            statement = (
                statement.where(col(AuditEvent.type).startswith(kind, autoescape=True))
                if kind.endswith(".")
                else statement.where(AuditEvent.type == kind)
            )
        if agent_id is not None:
            statement = statement.where(AuditEvent.agent_id == agent_id)
        if actor is not None:
            statement = statement.where(AuditEvent.actor == actor)
        if since is not None:
            statement = statement.where(col(AuditEvent.created_at) >= since)
        if until is not None:
            statement = statement.where(col(AuditEvent.created_at) < until)
        if before_seq is not None:
            statement = statement.where(col(AuditEvent.seq) < before_seq)
        return self._all(statement.order_by(col(AuditEvent.seq).desc()).limit(limit))

    def newest_created_at(self) -> datetime | None:
        """When the newest event of any organisation was written (a system read: metrics).

        Each organisation's newest event is found through the (org_id, seq) index, so a scrape
        reads one row per organisation, not the whole log."""
        head_of_org = (
            select(AuditEvent.created_at)
            .where(col(AuditEvent.org_id) == Organization.id)
            .order_by(col(AuditEvent.seq).desc())
            .limit(1)
            .correlate(Organization)
            .scalar_subquery()
        )
        newest = self.session.exec(select(func.max(head_of_org)).select_from(Organization)).one()
        return newest if isinstance(newest, datetime) else None

    def heads(self) -> Sequence[AuditEvent]:
        """Every organisation's newest event (system read, across organisations)."""
        newest = (
            select(AuditEvent.org_id, func.max(AuditEvent.seq).label("seq"))
            .group_by(col(AuditEvent.org_id))
            .subquery()
        )
        return self._all(
            self._statement()
            .join(
                newest, and_(col(AuditEvent.org_id) == newest.c.org_id, col(AuditEvent.seq) == newest.c.seq)
            )
            .order_by(col(AuditEvent.org_id))
        )
