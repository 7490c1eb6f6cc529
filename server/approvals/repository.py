"""Every query of the approvals domain."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import col, select

from server.kit.repository import Reader, TenantRepository
from server.models import Approval, Organization
from server.models.enums import ApprovalStatus


class ApprovalRepository(TenantRepository[Approval]):
    model = Approval
    agent_column = "agent_id"

    def for_intent(self, reader: Reader, intent_id: str) -> Approval | None:
        """The intent's approval in force: the one no newer approval superseded."""
        return self.first(
            self.readable(reader)
            .where(Approval.intent_id == intent_id)
            .where(Approval.status != ApprovalStatus.SUPERSEDED)
        )

    def pending_by_agent(self, *, org_id: str, now: datetime) -> dict[str, int]:
        """Approvals still waiting for a decision in the organisation, counted per agent."""
        rows = self.session.exec(
            select(Approval.agent_id, func.count())
            .where(Approval.org_id == org_id, Approval.status == ApprovalStatus.PENDING)
            .where(col(Approval.expires_at) > now)
            .group_by(col(Approval.agent_id))
        )
        return {agent_id: int(count) for agent_id, count in rows}

    def pending(self, reader: Reader, *, org_id: str, now: datetime) -> Sequence[Approval]:
        """The organisation's approvals still waiting for a decision, oldest first."""
        return self.all(
            self.readable(reader)
            .where(Approval.org_id == org_id, Approval.status == ApprovalStatus.PENDING)
            .where(col(Approval.expires_at) > now)
            .order_by(col(Approval.created_at))
        )

    def newest(
        self, reader: Reader, *, org_id: str, status: ApprovalStatus | None, limit: int
    ) -> Sequence[Approval]:
        statement = self.readable(reader).where(Approval.org_id == org_id)
        if status is not None:
            statement = statement.where(Approval.status == status)
        return self.all(statement.order_by(col(Approval.created_at).desc()).limit(limit))

    def lapsed(self, *, now: datetime, retry_window: timedelta, limit: int) -> Sequence[Approval]:
        """Pending past their TTL, or approved and not used within the retry window (system read)."""
        pending = self.all(
            self.statement()
            .where(Approval.status == ApprovalStatus.PENDING, col(Approval.expires_at) <= now)
            .limit(limit)
        )
        unused = self.all(
            self.statement()
            .where(Approval.status == ApprovalStatus.APPROVED)
            .where(col(Approval.decided_at) <= now - retry_window)
            .limit(limit)
        )
        return [*pending, *unused]

    def ttl_seconds(self, org_id: str) -> int:
        """The organisation's approval TTL (a setting kept on the organisation's row)."""
        ttl = self.session.exec(
            select(Organization.approval_ttl_seconds).where(Organization.id == org_id)
        ).one()
        return int(ttl)
