"""Every query on job leases: conditional writes, so two processes never both hold a lease."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CursorResult, or_, update
from sqlmodel import col

from server.kit.repository import Repository
from server.models import JobLease


class LeaseRepository(Repository[JobLease]):
    model = JobLease

    def take_over(self, *, name: str, holder: str, now: datetime, expires_at: datetime) -> bool:
        """Renew the lease `holder` holds, or take one that lapsed; False if another holds it."""
        result = self.session.execute(
            update(JobLease)
            .where(col(JobLease.name) == name)
            .where(or_(col(JobLease.holder) == holder, col(JobLease.expires_at) <= now))
            .values(holder=holder, expires_at=expires_at)
        )
        return isinstance(result, CursorResult) and result.rowcount == 1

    def exists(self, name: str) -> bool:
        return self.session.get(JobLease, name) is not None

    def lapse(self, *, name: str, holder: str, now: datetime) -> None:
        """End the lease now, if `holder` holds it."""
        self.session.execute(
            update(JobLease)
            .where(col(JobLease.name) == name, col(JobLease.holder) == holder)
            .values(expires_at=now)
        )
