"""A process keeps the policy versions and rule versions it has read (they never change), never which
of them is in force: a policy set, a rule added, changed or removed by another process shows in this
process's next budget, with its caches warm."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.payments.budget import Budget, budget
from server.policy.service import current_policy
from server.tenancy.service import AgentNotFound, get_agent
from tests.support.cli import paywarden
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent


def read_budget(db: Database, agent_id: str) -> Budget:
    with db.read() as session:
        return budget(session, OPERATOR, agent_id=agent_id, now=SystemClock().now())


def other_process(db: Database, tmp_path: Path, *args: str) -> None:
    done = paywarden("admin", *args, "--json", cwd=tmp_path, database_url=db.url)
    assert done.code == 0, done.stderr


def test_another_process_changes_show_in_the_next_budget(db: Database, tmp_path: Path) -> None:
    setup = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"])
    first = read_budget(db, setup.agent_id)  # this process now keeps version 1 and the default rule
    assert first.policy.daily_cap_usd == Decimal("10.00")
    assert read_budget(db, setup.agent_id).policy == first.policy

    other_process(db, tmp_path, "policy", "set", setup.agent_id, "--daily-cap", "3")
    after_set = read_budget(db, setup.agent_id)
    assert (after_set.policy.version, after_set.policy.daily_cap_usd) == (
        first.policy.version + 1,
        Decimal("3"),
    )
    assert after_set.effective.cap_atomic == 3_000_000
    with db.read() as session:  # what a reservation decides with reads the same version
        assert current_policy(session, get_agent(session, OPERATOR, setup.agent_id)) == after_set.policy

    other_process(
        db, tmp_path, "rule", "add", "--scope", "agent", "--id", setup.agent_id,
        "--kind", "limit", "--limit-usd", "1", "--window", "day",
    )  # fmt: skip
    with_rule = read_budget(db, setup.agent_id)
    added = [use.rule for use in with_rule.rule_limits if use.limit_atomic == 1_000_000]
    assert len(added) == 1
    assert with_rule.effective.cap_atomic == 1_000_000

    other_process(db, tmp_path, "rule", "set", added[0].id, "--limit-usd", "2")
    changed = read_budget(db, setup.agent_id)
    assert [
        (use.rule.version, use.limit_atomic) for use in changed.rule_limits if use.rule.id == added[0].id
    ] == [(2, 2_000_000)]
    assert changed.effective.cap_atomic == 2_000_000

    other_process(db, tmp_path, "rule", "remove", added[0].id)
    removed = read_budget(db, setup.agent_id)
    assert all(use.rule.id != added[0].id for use in removed.rule_limits + removed.scope_limits)
    assert removed.effective.cap_atomic == 3_000_000
    assert [use.rule for use in removed.rule_limits] == [use.rule for use in first.rule_limits]


def test_the_one_statement_reads_an_agent_only_within_reach(db: Database) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    mine = make_agent(db, settings, allow_hosts=["api.example.com"])
    sibling = make_agent(db, settings, allow_hosts=["api.example.com"], org_id=mine.org_id, name="sibling")
    other = make_agent(db, settings, allow_hosts=["api.example.com"])
    agent = Principal.for_agent(org_id=mine.org_id, agent_id=mine.agent_id, token_id="t", scopes=AGENT_SCOPES)
    member = Principal.for_member(org_id=mine.org_id, member_id="m")
    now = SystemClock().now()
    with db.read() as session:
        assert budget(session, agent, agent_id=mine.agent_id, now=now).agent.id == mine.agent_id
        assert budget(session, member, agent_id=sibling.agent_id, now=now).agent.id == sibling.agent_id
        for reader, agent_id in (
            (agent, sibling.agent_id),
            (agent, other.agent_id),
            (member, other.agent_id),
        ):
            with pytest.raises(AgentNotFound):
                budget(session, reader, agent_id=agent_id, now=now)
