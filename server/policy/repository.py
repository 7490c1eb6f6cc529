"""Every query on policy versions and rule versions.

Both are append-only: a change writes the next version, so reads ask for the newest one. A policy
version belongs to one agent. A rule belongs to an organisation; an agent principal reads its
organisation's team, member and organisation rules, and only its own agent rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import and_, bindparam, func, or_
from sqlmodel import col, select
from sqlmodel.sql.expression import SelectOfScalar

from server.kit.repository import Reader, TenantRepository
from server.models import PolicyVersion, RuleVersion
from server.vocabulary import RuleScope, RuleSource

# The columns a rule is made of, in the order `RuleVersionRepository.in_force_rows` returns them.
RULE_COLUMNS = (
    "rule_id",
    "version",
    "scope",
    "kind",
    "host",
    "path_prefix",
    "limit_atomic",
    "window",
    "source",
    "expires_at",
)
# `in_force_rows` statements by number of scopes, built once and kept, their values bound.
_IN_FORCE: dict[int, Any] = {}


def _in_force_statement(scopes: int) -> Any:
    table = RuleVersion.__table__  # type: ignore[attr-defined]
    newer = table.alias("newer")
    latest = (
        select(newer.c.rule_id, func.max(newer.c.version).label("latest"))
        .where(newer.c.org_id == bindparam("org"))
        .group_by(newer.c.rule_id)
        .subquery()
    )
    return (
        select(*(table.c[name] for name in RULE_COLUMNS))
        .join(latest, and_(table.c.rule_id == latest.c.rule_id, table.c.version == latest.c.latest))
        .where(table.c.org_id == bindparam("org"), table.c.active.is_(True))
        .where(or_(table.c.expires_at.is_(None), table.c.expires_at > bindparam("now")))
        .where(
            or_(
                *(
                    and_(
                        table.c.scope == bindparam(f"scope_{i}"),
                        table.c.scope_id == bindparam(f"scope_id_{i}"),
                    )
                    for i in range(scopes)
                )
            )
        )
        .order_by(table.c.created_at, table.c.rule_id)
    )


_NEWEST_ID: list[Any] = []  # `newest_id_for_agent`'s statement, built once


class PolicyVersionRepository(TenantRepository[PolicyVersion]):
    model = PolicyVersion
    agent_column: ClassVar[str | None] = "agent_id"

    def by_id(self, *, org_id: str, version_id: str) -> PolicyVersion | None:
        return self._first(
            self._statement().where(PolicyVersion.org_id == org_id, PolicyVersion.id == version_id)
        )

    def newest_id_for_agent(self, *, org_id: str, agent_id: str) -> str | None:
        """The id of the agent's newest policy version, from a statement built once (no model)."""
        if not _NEWEST_ID:
            table = PolicyVersion.__table__  # type: ignore[attr-defined]
            _NEWEST_ID.append(
                select(table.c.id)
                .where(table.c.org_id == bindparam("org"), table.c.agent_id == bindparam("agent"))
                .order_by(table.c.version.desc())
                .limit(1)
            )
        return self.session.connection().execute(_NEWEST_ID[0], {"org": org_id, "agent": agent_id}).scalar()


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
        return self._first(
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
            self._statement()
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
        return self._all(statement)

    def in_force_rows(
        self, *, org_id: str, now: datetime, scopes: Sequence[tuple[RuleScope, str]]
    ) -> Sequence[Any]:
        """`in_force` for one of `scopes`, as rows of RULE_COLUMNS rather than loaded models: the
        statement is built once per number of scopes and kept, its values bound."""
        if not scopes:
            return []
        statement = _IN_FORCE.get(len(scopes))
        if statement is None:
            statement = _IN_FORCE[len(scopes)] = _in_force_statement(len(scopes))
        params: dict[str, Any] = {"org": org_id, "now": now}
        for i, (scope, scope_id) in enumerate(scopes):
            params[f"scope_{i}"] = scope
            params[f"scope_id_{i}"] = scope_id
        return self.session.connection().execute(statement, params).all()

    def chat_rules_proposed_since(self, *, org_id: str, agent_id: str, since: datetime) -> int:
        """How many chat rules the agent proposed (first versions written) after `since`."""
        count = self.session.exec(
            select(func.count())
            .select_from(RuleVersion)
            .where(RuleVersion.org_id == org_id)
            .where(RuleVersion.scope == RuleScope.AGENT, RuleVersion.scope_id == agent_id)
            .where(RuleVersion.source == RuleSource.CHAT, RuleVersion.version == 1)
            .where(col(RuleVersion.created_at) > since)
        ).one()
        return int(count)
