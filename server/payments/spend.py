"""What the organisation's agents spent, for the dashboard: each agent's spend today against its
caps, and the last days' spend per day and agent. Counted exactly as the caps count it (the same
`repository.counted`, by the time a payment was authorised, days in UTC)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from sqlmodel import Session

from auth.principal import Principal
from server.kit.clock import as_utc, utc_day_start
from server.kit.money import atomic_to_usd, usd_to_atomic
from server.models import Agent
from server.payments.budget import CapLevel, cap_level
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import IntentRepository
from server.policy.model import Policy
from server.policy.service import current_policy
from server.tenancy.service import agents

HISTORY_DAYS = 30


@dataclass(frozen=True)
class AgentSpend:
    """One agent's spend: per day of the history (oldest first, today last), and its caps."""

    agent: Agent
    policy: Policy
    by_day_atomic: tuple[int, ...]

    @property
    def spent_today_atomic(self) -> int:
        return self.by_day_atomic[-1]

    @property
    def daily_cap_atomic(self) -> int:
        return usd_to_atomic(self.policy.daily_cap_usd)

    @property
    def remaining_today_atomic(self) -> int:
        return max(self.daily_cap_atomic - self.spent_today_atomic, 0)

    @property
    def percent_of_cap(self) -> int:
        """Today's spend as a whole percentage of the daily cap (100 when the cap is zero)."""
        cap = self.daily_cap_atomic
        return 100 if cap == 0 else min(100, self.spent_today_atomic * 100 // cap)

    @property
    def level(self) -> CapLevel:
        return cap_level(atomic_to_usd(self.spent_today_atomic), self.policy.daily_cap_usd)


@dataclass(frozen=True)
class SpendOverview:
    days: tuple[date, ...]  # oldest first; the last is today (UTC)
    agents: list[AgentSpend]

    @property
    def total_atomic(self) -> int:
        return sum(sum(item.by_day_atomic) for item in self.agents)


def spend_overview(
    session: Session, principal: Principal, *, now: datetime, days: int = HISTORY_DAYS
) -> SpendOverview:
    """Every agent the principal sees, with its policy in force and its spend on each of the last
    `days` days (today included)."""
    if days < 1:
        raise ValueError("at least one day")
    today = utc_day_start(now)
    first = today - timedelta(days=days - 1)
    calendar = tuple((first + timedelta(days=n)).date() for n in range(days))
    sums: dict[tuple[str, date], int] = {}
    for agent_id, when, amount in IntentRepository(session).counted_since(
        principal, since=first, never_sent=NEVER_SENT_FAILURES
    ):
        key = (agent_id, as_utc(when).date())
        sums[key] = sums.get(key, 0) + amount
    return SpendOverview(
        days=calendar,
        agents=[
            AgentSpend(
                agent=agent,
                policy=current_policy(session, agent),
                by_day_atomic=tuple(sums.get((agent.id, day), 0) for day in calendar),
            )
            for agent in agents(session, principal)
        ],
    )
