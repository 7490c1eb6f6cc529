"""Every query on organisations, teams, members and agents, each scoped by who reads.

An organisation is its own tenant (`org_column` is its id); an agent principal reads only its own
agent row. Names and emails are looked up within one organisation, never across them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from sqlmodel import col

from server.kit.repository import Reader, TenantRepository
from server.models import Agent, Member, Organization, Team


class OrganizationRepository(TenantRepository[Organization]):
    model = Organization
    org_column: ClassVar[str] = "id"

    def by_id_or_name(self, reader: Reader, ref: str) -> Organization | None:
        return self.get_readable(reader, ref) or self.first(
            self.readable(reader).where(Organization.name == ref)
        )

    def all_readable(self, reader: Reader) -> Sequence[Organization]:
        return self.all(self.readable(reader).order_by(col(Organization.created_at), col(Organization.id)))


class TeamRepository(TenantRepository[Team]):
    model = Team

    def by_id_or_name(self, reader: Reader, ref: str, *, org_id: str) -> Team | None:
        in_org = self.readable(reader).where(Team.org_id == org_id)
        return self.first(in_org.where(Team.id == ref)) or self.first(in_org.where(Team.name == ref))


class MemberRepository(TenantRepository[Member]):
    model = Member

    def by_id_or_email(self, reader: Reader, ref: str, *, org_id: str) -> Member | None:
        in_org = self.readable(reader).where(Member.org_id == org_id)
        return self.first(in_org.where(Member.id == ref)) or self.first(
            in_org.where(Member.email == ref.strip().lower())
        )


class AgentRepository(TenantRepository[Agent]):
    model = Agent
    agent_column: ClassVar[str | None] = "id"

    def by_name(self, reader: Reader, *, org_id: str, name: str) -> Agent | None:
        return self.first(self.readable(reader).where(Agent.org_id == org_id, Agent.name == name))
