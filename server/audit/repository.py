"""Every query on the audit log: one hash chain of events per organisation, ordered by `seq`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

from sqlalchemy import and_, func
from sqlmodel import col, select

from server.kit.repository import TenantRepository
from server.models import AuditEvent


class AuditRepository(TenantRepository[AuditEvent]):
    model = AuditEvent
    agent_column: ClassVar[str | None] = "agent_id"

    def last_of_org(self, org_id: str) -> AuditEvent | None:
        return self._first(
            self._statement().where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq).desc())
        )

    def chain_of_org(self, org_id: str) -> Iterator[AuditEvent]:
        """The organisation's events, first to last."""
        yield from self.session.exec(
            self._statement().where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq))
        )

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
