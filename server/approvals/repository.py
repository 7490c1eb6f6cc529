"""Every query of the approvals domain."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import CursorResult, func, update
from sqlmodel import col, select

from server.kit.repository import Reader, TenantRepository
from server.models import (
    Agent,
    Approval,
    ApprovalNotification,
    AuditEvent,
    Member,
    Organization,
    PolicyChangeRequest,
)
from server.vocabulary import ApprovalStatus, NotificationStatus, PolicyChangeStatus


class ApprovalRepository(TenantRepository[Approval]):
    model = Approval
    agent_column = "agent_id"

    def for_intent(self, reader: Reader, intent_id: str) -> Approval | None:
        """The intent's approval in force: the one no newer approval superseded."""
        return self._first(
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

    def open_of_agent(self, reader: Reader, *, org_id: str, agent_id: str) -> Sequence[Approval]:
        """The agent's approvals that could still let it pay: pending, or approved and not used."""
        return self._all(
            self.readable(reader)
            .where(Approval.org_id == org_id, Approval.agent_id == agent_id)
            .where(col(Approval.status).in_((ApprovalStatus.PENDING, ApprovalStatus.APPROVED)))
            .where(col(Approval.consumed_at).is_(None))
        )

    def pending(self, reader: Reader, *, org_id: str, now: datetime) -> Sequence[Approval]:
        """The organisation's approvals still waiting for a decision, oldest first."""
        return self._all(
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
        return self._all(statement.order_by(col(Approval.created_at).desc()).limit(limit))

    def decided(self, reader: Reader, *, org_id: str, limit: int) -> Sequence[Approval]:
        """The organisation's approvals a person decided, the newest decision first."""
        statement = self.readable(reader).where(Approval.org_id == org_id)
        statement = statement.where(col(Approval.decided_at).is_not(None))
        return self._all(statement.order_by(col(Approval.decided_at).desc(), col(Approval.id)).limit(limit))

    def lapsed(self, *, now: datetime, retry_window: timedelta, limit: int) -> Sequence[Approval]:
        """Pending past their TTL, or approved and not used within the retry window (system read)."""
        pending = self._all(
            self._statement()
            .where(Approval.status == ApprovalStatus.PENDING, col(Approval.expires_at) <= now)
            .limit(limit)
        )
        unused = self._all(
            self._statement()
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


class PolicyChangeRepository(TenantRepository[PolicyChangeRequest]):
    """Policy changes agents asked for; an agent reads only its own."""

    model = PolicyChangeRequest
    agent_column = "agent_id"

    def open_of_agent(
        self, reader: Reader, *, org_id: str, agent_id: str, now: datetime
    ) -> Sequence[PolicyChangeRequest]:
        """The agent's requests still waiting for a decision, oldest first."""
        return self._all(
            self._open(reader, org_id=org_id, now=now)
            .where(PolicyChangeRequest.agent_id == agent_id)
            .order_by(col(PolicyChangeRequest.created_at), col(PolicyChangeRequest.id))
        )

    def pending(self, reader: Reader, *, org_id: str, now: datetime) -> Sequence[PolicyChangeRequest]:
        """The organisation's requests still waiting for a decision, oldest first."""
        return self._all(
            self._open(reader, org_id=org_id, now=now).order_by(
                col(PolicyChangeRequest.created_at), col(PolicyChangeRequest.id)
            )
        )

    def newest(
        self, reader: Reader, *, org_id: str, agent_id: str | None, limit: int
    ) -> Sequence[PolicyChangeRequest]:
        """The organisation's requests (or one agent's), newest first, whatever their status."""
        statement = self.readable(reader).where(PolicyChangeRequest.org_id == org_id)
        if agent_id is not None:
            statement = statement.where(PolicyChangeRequest.agent_id == agent_id)
        return self._all(
            statement.order_by(
                col(PolicyChangeRequest.created_at).desc(), col(PolicyChangeRequest.id).desc()
            ).limit(limit)
        )

    def lapsed(self, *, now: datetime, limit: int) -> Sequence[PolicyChangeRequest]:
        """Requests still pending past their time, in every organisation (the expiry job)."""
        return self._all(
            self._statement()
            .where(PolicyChangeRequest.status == PolicyChangeStatus.PENDING)
            .where(col(PolicyChangeRequest.expires_at) <= now)
            .order_by(col(PolicyChangeRequest.expires_at))
            .limit(limit)
        )

    def _open(self, reader: Reader, *, org_id: str, now: datetime) -> Any:
        return (
            self.readable(reader)
            .where(PolicyChangeRequest.org_id == org_id)
            .where(PolicyChangeRequest.status == PolicyChangeStatus.PENDING)
            .where(col(PolicyChangeRequest.expires_at) > now)
        )


def _rowcount(result: Any) -> int:
    return result.rowcount if isinstance(result, CursorResult) else 0


class NotificationRepository(TenantRepository[ApprovalNotification]):
    """The outbox of announcements of pending approvals. Read by the notifier (the system)."""

    model = ApprovalNotification

    def unannounced(self, *, since: datetime, now: datetime, limit: int) -> Sequence[Approval]:
        """Pending approvals created since `since` that have no outbox row yet, oldest first."""
        statement = (
            select(Approval)
            .outerjoin(ApprovalNotification, col(ApprovalNotification.approval_id) == col(Approval.id))
            .where(col(ApprovalNotification.id).is_(None))
            .where(Approval.status == ApprovalStatus.PENDING)
            .where(col(Approval.created_at) >= since, col(Approval.expires_at) > now)
            .order_by(col(Approval.created_at))
            .limit(limit)
        )
        return self.session.exec(statement).all()

    def waiting(self, *, limit: int) -> Sequence[tuple[ApprovalNotification, Approval, str]]:
        """Rows not yet claimed, with their approval and the agent's name, oldest first."""
        statement = (
            select(ApprovalNotification, Approval, Agent.name)
            .join(Approval, col(Approval.id) == col(ApprovalNotification.approval_id))
            .join(Agent, col(Agent.id) == col(Approval.agent_id))
            .where(ApprovalNotification.status == NotificationStatus.PENDING)
            .order_by(col(ApprovalNotification.created_at))
            .limit(limit)
        )
        return [(row, approval, str(name)) for row, approval, name in self.session.exec(statement).all()]

    def unannounced_account_changes(
        self, *, types: Sequence[str], since: datetime, limit: int
    ) -> Sequence[AuditEvent]:
        """Audit events of these types (passkeys added or removed) since `since` that have no
        outbox row yet, oldest first."""
        statement = (
            select(AuditEvent)
            .outerjoin(ApprovalNotification, col(ApprovalNotification.audit_event_id) == col(AuditEvent.id))
            .where(col(ApprovalNotification.id).is_(None))
            .where(col(AuditEvent.type).in_(list(types)), col(AuditEvent.created_at) >= since)
            .order_by(col(AuditEvent.created_at))
            .limit(limit)
        )
        return self.session.exec(statement).all()

    def waiting_account_changes(self, *, limit: int) -> Sequence[tuple[ApprovalNotification, AuditEvent]]:
        """Rows of account changes not yet claimed, with their audit event, oldest first."""
        statement = (
            select(ApprovalNotification, AuditEvent)
            .join(AuditEvent, col(AuditEvent.id) == col(ApprovalNotification.audit_event_id))
            .where(ApprovalNotification.status == NotificationStatus.PENDING)
            .order_by(col(ApprovalNotification.created_at))
            .limit(limit)
        )
        return [(row, event) for row, event in self.session.exec(statement).all()]

    def sealed_webhook(self, org_id: str) -> bytes | None:
        """The organisation's own Slack webhook, sealed, if it set one."""
        row = self.session.execute(
            select(col(Organization.slack_webhook_sealed)).where(col(Organization.id) == org_id)
        ).first()
        return None if row is None else row[0]

    def agent_name(self, *, org_id: str, agent_id: str | None) -> str | None:
        agent = self.session.get(Agent, agent_id) if agent_id is not None else None
        return agent.name if agent is not None and agent.org_id == org_id else None

    def member_email(self, *, org_id: str, member_id: object) -> str | None:
        member = self.session.get(Member, member_id) if isinstance(member_id, str) else None
        return member.email if member is not None and member.org_id == org_id else None

    def messages_since(self, *, org_id: str, since: datetime) -> int:
        """Messages sent (or attempted) for the organisation since `since`: a summary counts once."""
        statement = (
            select(func.count())
            .select_from(ApprovalNotification)
            .where(ApprovalNotification.org_id == org_id, col(ApprovalNotification.announced) > 0)
            .where(col(ApprovalNotification.claimed_at) > since)
        )
        return int(self.session.exec(statement).one())

    def claim(self, notification_id: str, *, holder: str, announced: int, now: datetime) -> bool:
        """Take one waiting row for sending; False when another pass took (or closed) it first."""
        result = self.session.execute(
            update(ApprovalNotification)
            .where(col(ApprovalNotification.id) == notification_id)
            .where(col(ApprovalNotification.status) == NotificationStatus.PENDING)
            .values(status=NotificationStatus.SENDING, claimed_by=holder, claimed_at=now, announced=announced)
        )
        return _rowcount(result) == 1

    def close(
        self, notification_id: str, *, status: NotificationStatus, error: str | None, now: datetime
    ) -> None:
        """Close a waiting or claimed row (sent, summarised, skipped or failed)."""
        self.session.execute(
            update(ApprovalNotification)
            .where(col(ApprovalNotification.id) == notification_id)
            .where(
                col(ApprovalNotification.status).in_([NotificationStatus.PENDING, NotificationStatus.SENDING])
            )
            .values(status=status, error=error, finished_at=now)
        )

    def abandon_stale(self, *, claimed_before: datetime, now: datetime) -> int:
        """Claimed rows whose process never said how the sending went: they may have been sent, so
        they are never sent again."""
        result = self.session.execute(
            update(ApprovalNotification)
            .where(col(ApprovalNotification.status) == NotificationStatus.SENDING)
            .where(col(ApprovalNotification.claimed_at) < claimed_before)
            .values(status=NotificationStatus.FAILED, error="outcome_unknown", finished_at=now)
        )
        return _rowcount(result)
