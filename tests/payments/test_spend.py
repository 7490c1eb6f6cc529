"""The dashboard's spend: per agent and UTC day over the last 30 days, counted as the caps count
it, today's matching the budget's, and nothing of another organisation."""

from __future__ import annotations

from datetime import timedelta

from auth.principal import Principal
from server.kit.clock import SystemClock, utc_day_start
from server.kit.db import Database
from server.payments.budget import budget
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import IntentRepository, SpendFilter
from server.payments.spend import spend_overview
from server.vocabulary import RuleScope
from tests.support.payment_rows import write_payments
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent


def test_spend_per_day_and_agent_is_what_the_caps_count(db: Database) -> None:
    settings = settings_for(database_url=db.url, port=8402)
    first = make_agent(db, settings, allow_hosts=["api.example.com"], name="alpha", daily_cap="5.00")
    second = make_agent(db, settings, allow_hosts=[], org_id=first.org_id, name="beta")
    make_agent(db, settings, allow_hosts=[])  # another organisation's agent
    now = SystemClock().now()
    agents = [first.agent_id, second.agent_id]
    written = write_payments(db, org_id=first.org_id, agents=agents, count=600, now=now, days=60)

    member = Principal.for_member(org_id=first.org_id, member_id="mem_reader")
    with db.read() as session:
        overview = spend_overview(session, member, now=now)
        budgets = {agent: budget(session, OPERATOR, agent_id=agent, now=now) for agent in agents}
        # The ledger's own sums (what a decision counts) since each day's start, per agent.
        starts = [utc_day_start(now) - timedelta(days=29 - n) for n in range(30)]
        since_each = {
            agent: [
                spent
                for spent, _ in IntentRepository(session).counted_spends(
                    [(SpendFilter(first.org_id, RuleScope.AGENT, agent), start) for start in starts],
                    never_sent=NEVER_SENT_FAILURES,
                )
            ]
            for agent in agents
        }

    assert len(overview.days) == 30
    assert overview.days[-1] == utc_day_start(now).date()
    assert [item.agent.id for item in overview.agents] == agents  # the stranger is not seen
    for item in overview.agents:
        assert item.spent_today_atomic == written.spent_today_atomic.get(item.agent.id, 0)
        assert item.spent_today_atomic == budgets[item.agent.id].spent_today_atomic
        since = since_each[item.agent.id]
        assert list(item.by_day_atomic) == [since[n] - (since[n + 1] if n < 29 else 0) for n in range(30)]
        assert sum(item.by_day_atomic) > 0
    alpha = overview.agents[0]
    assert alpha.daily_cap_atomic == 5_000_000
    assert alpha.percent_of_cap == alpha.spent_today_atomic * 100 // 5_000_000
