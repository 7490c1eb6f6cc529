"""Every query on organisations, teams, members and agents, each scoped by who reads.

An organisation is its own tenant (`org_column` is its id); an agent principal reads only its own
agent row. Names and emails are looked up within one organisation, never across them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import and_, bindparam, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import aliased
from sqlmodel import col

from server.kit.repository import Reader, ReaderShape, TenantRepository, reader_shape, scope_params, scoped
from server.models import Agent, Member, Organization, PendingChange, PolicyVersion, Team

# The statement of `AgentRepository.with_current_policy`, built once per shape of reader
# (unrestricted, of no organisation, of an organisation, of one agent), its values bound.
_WITH_POLICY: dict[ReaderShape, Any] = {}


def _with_policy_statement(shape: ReaderShape) -> Any:
    newer = aliased(PolicyVersion)
    newest = (
        select(func.max(newer.version))
        .where(col(newer.agent_id) == col(Agent.id))
        .correlate(Agent)
        .scalar_subquery()
    )
    statement = (
        select(Agent, col(PolicyVersion.id))
        .outerjoin(
            PolicyVersion,
            and_(col(PolicyVersion.agent_id) == col(Agent.id), col(PolicyVersion.version) == newest),
        )
        .where(col(Agent.id) == bindparam("agent"))
    )
    return scoped(statement, shape, col(Agent.org_id), col(Agent.id))


class OrganizationRepository(TenantRepository[Organization]):
    model = Organization
    org_column: ClassVar[str] = "id"

    def by_id_or_name(self, reader: Reader, ref: str) -> Organization | None:
        return self.get_readable(reader, ref) or self._first(
            self.readable(reader).where(Organization.name == ref)
        )

    def renamed(self, *, org_id: str, name: str) -> bool:
        """Give the organisation another name in a savepoint; False, and nothing changed, when
        another organisation has it."""
        org = self.session.get(Organization, org_id)
        assert org is not None
        try:
            with self.session.begin_nested():
                org.name = name
                self.session.add(org)
                self.session.flush()
        except IntegrityError:
            self.session.refresh(org)
            return False
        return True

    def all_readable(self, reader: Reader) -> Sequence[Organization]:
        return self._all(self.readable(reader).order_by(col(Organization.created_at), col(Organization.id)))


class TeamRepository(TenantRepository[Team]):
    model = Team

    def of_org(self, reader: Reader, *, org_id: str) -> Sequence[Team]:
        """The organisation's teams, oldest first."""
        statement = self.readable(reader).where(Team.org_id == org_id)
        return self._all(statement.order_by(col(Team.created_at), col(Team.id)))

    def by_id_or_name(self, reader: Reader, ref: str, *, org_id: str) -> Team | None:
        in_org = self.readable(reader).where(Team.org_id == org_id)
        return self._first(in_org.where(Team.id == ref)) or self._first(in_org.where(Team.name == ref))


class MemberRepository(TenantRepository[Member]):
    model = Member

    def of_org(self, reader: Reader, *, org_id: str) -> Sequence[Member]:
        """The organisation's members, oldest first."""
        statement = self.readable(reader).where(Member.org_id == org_id)
        return self._all(statement.order_by(col(Member.created_at), col(Member.id)))

    def by_id_or_email(self, reader: Reader, ref: str, *, org_id: str) -> Member | None:
        in_org = self.readable(reader).where(Member.org_id == org_id)
        return self._first(in_org.where(Member.id == ref)) or self._first(
            in_org.where(Member.email == ref.strip().lower())
        )


class AgentRepository(TenantRepository[Agent]):
    model = Agent
    agent_column: ClassVar[str | None] = "id"

    def disabled_now(self, *, org_id: str, agent_id: str) -> bool:
        """Whether the agent is disabled as the database has it now (missing counts as disabled)."""
        row = self.session.execute(
            select(col(Agent.disabled_at)).where(col(Agent.org_id) == org_id, col(Agent.id) == agent_id)
        ).first()
        return row is None or row[0] is not None

    def all_readable(self, reader: Reader, *, org_id: str | None = None) -> Sequence[Agent]:
        """The agents the reader may see (of `org_id` only, when given), oldest first."""
        statement = self.readable(reader)
        if org_id is not None:
            statement = statement.where(Agent.org_id == org_id)
        return self._all(statement.order_by(col(Agent.created_at), col(Agent.id)))

    def with_current_policy(self, reader: Reader, agent_id: str) -> tuple[Agent, str | None] | None:
        """The agent, if the reader may read it, with the id of its newest policy version (None if
        it has none), in one statement."""
        shape = reader_shape(reader)
        statement = _WITH_POLICY.get(shape)
        if statement is None:
            statement = _WITH_POLICY[shape] = _with_policy_statement(shape)
        params = {"agent": agent_id, **scope_params(reader, shape)}
        row = self.session.execute(statement, params).first()
        return None if row is None else (row[0], row[1])

    def by_name(self, reader: Reader, *, org_id: str, name: str) -> Agent | None:
        return self._first(self.readable(reader).where(Agent.org_id == org_id, Agent.name == name))

    def named(self, reader: Reader, name: str, *, org_id: str | None = None) -> Sequence[Agent]:
        """The readable agents of this name: one per organisation at most (of `org_id` when given)."""
        statement = self.readable(reader).where(Agent.name == name)
        if org_id is not None:
            statement = statement.where(Agent.org_id == org_id)
        return self._all(statement.order_by(col(Agent.org_id)))


class PendingChangeRepository(TenantRepository[PendingChange]):
    model = PendingChange

    def confirm(self, reader: Reader, change_id: str, *, member_id: str, now: datetime) -> bool:
        """Mark this organisation's live, unconfirmed change confirmed by `member_id`, once."""
        statement = (
            update(PendingChange)
            .where(col(PendingChange.id) == change_id, col(PendingChange.org_id) == reader.org_id)
            .where(col(PendingChange.confirmed_at).is_(None), col(PendingChange.expires_at) > now)
            .values(confirmed_at=now, confirmed_by=member_id)
        )
        result = self.session.execute(statement)
        return getattr(result, "rowcount", 0) == 1
