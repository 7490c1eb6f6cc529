"""Every query on policy versions and rule versions.

Both are append-only: a change writes the next version, so reads ask for the newest one. A policy
version belongs to one agent. A rule belongs to an organisation; an agent principal reads its
organisation's team, member and organisation rules, and only its own agent rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from sqlalchemy import and_, func, or_
from sqlmodel import col, select
from sqlmodel.sql.expression import SelectOfScalar

from server.kit.repository import Reader, TenantRepository
from server.models import PolicyVersion, RuleVersion
from server.models.enums import RuleScope, RuleSource


class PolicyVersionRepository(TenantRepository[PolicyVersion]):
    model = PolicyVersion
    agent_column: ClassVar[str | None] = "agent_id"

    def newest_for_agent(self, agent_id: str) -> PolicyVersion | None:
        return self.first(
            self.statement()
            .where(PolicyVersion.agent_id == agent_id)
            .order_by(col(PolicyVersion.version).desc())
        )


class RuleVersionRepository(TenantRepository[RuleVersion]):
    model = RuleVersion
    id_column: ClassVar[str] = "rule_id"

    def readable(self, reader: Reader) -> SelectOfScalar[RuleVersion]:
        statement = super().readable(reader)
        if reader.agent_id is not None and not reader.unrestricted:
            statement = statement.where(
                or_(col(RuleVersion.scope) != RuleScope.AGENT, col(RuleVersion.scope_id) == reader.agent_id)
            )
        return statement

    def get_readable(self, reader: Reader, row_id: str) -> RuleVersion | None:
        """The rule's newest version, removed or not."""
        return self.first(
            self.readable(reader)
            .where(RuleVersion.rule_id == row_id)
            .order_by(col(RuleVersion.version).desc())
        )

    def in_force(
        self, *, org_id: str, now: datetime, scopes: Sequence[tuple[RuleScope, str]] | None = None
    ) -> Sequence[RuleVersion]:
        """Each rule's newest version, if it is active and not expired, oldest rule first; only
        rules for one of `scopes` (scope, scope id) when they are given."""
        if scopes is not None and not scopes:
            return []
        latest = (
            select(RuleVersion.rule_id, func.max(RuleVersion.version).label("latest"))
            .where(RuleVersion.org_id == org_id)
            .group_by(col(RuleVersion.rule_id))
            .subquery()
        )
        statement = (
            self.statement()
            .join(
                latest,
                and_(
                    col(RuleVersion.rule_id) == latest.c.rule_id,
                    col(RuleVersion.version) == latest.c.latest,
                ),
            )
            .where(RuleVersion.org_id == org_id, col(RuleVersion.active).is_(True))
            .where(or_(col(RuleVersion.expires_at).is_(None), col(RuleVersion.expires_at) > now))
            .order_by(col(RuleVersion.created_at), col(RuleVersion.rule_id))
        )
        if scopes is not None:
            statement = statement.where(
                or_(
                    *(
                        and_(col(RuleVersion.scope) == scope, col(RuleVersion.scope_id) == scope_id)
                        for scope, scope_id in scopes
                    )
                )
            )
        return self.all(statement)

    def chat_rules_proposed_since(self, *, agent_id: str, since: datetime) -> int:
        """How many chat rules the agent proposed (first versions written) after `since`."""
        count = self.session.exec(
            select(func.count())
            .select_from(RuleVersion)
            .where(RuleVersion.scope == RuleScope.AGENT, RuleVersion.scope_id == agent_id)
            .where(RuleVersion.source == RuleSource.CHAT, RuleVersion.version == 1)
            .where(col(RuleVersion.created_at) > since)
        ).one()
        return int(count)
