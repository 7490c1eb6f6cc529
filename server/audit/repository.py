"""Every query on the audit log: one hash chain of events per organisation, ordered by `seq`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import ClassVar

from sqlmodel import col

from server.kit.repository import TenantRepository
from server.models import AuditEvent


class AuditRepository(TenantRepository[AuditEvent]):
    model = AuditEvent
    agent_column: ClassVar[str | None] = "agent_id"

    def last_of_org(self, org_id: str) -> AuditEvent | None:
        return self.first(
            self.statement().where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq).desc())
        )

    def chain_of_org(self, org_id: str) -> Iterator[AuditEvent]:
        """The organisation's events, first to last."""
        yield from self.session.exec(
            self.statement().where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq))
        )

    def newest_of_org(self, org_id: str, *, limit: int) -> Sequence[AuditEvent]:
        return self.all(
            self.statement()
            .where(AuditEvent.org_id == org_id)
            .order_by(col(AuditEvent.seq).desc())
            .limit(limit)
        )
