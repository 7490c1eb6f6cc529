"""The agent's budget for today, as get_budget reports it."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlmodel import Session

from server.chain.watch import recent_warnings
from server.kit.clock import isoformat, next_utc_midnight, utc_day_start
from server.kit.money import atomic_to_usd, format_usd
from server.payments.ledger import spent_since
from server.payments.results import usd
from server.policy.service import current_policy
from server.tenancy.service import find_agent

WARNING_LEVEL = Decimal("0.8")


def cap_level(spent: Decimal, cap: Decimal) -> str:
    if spent >= cap:
        return "exhausted"
    if spent >= cap * WARNING_LEVEL:
        return "warning"
    return "ok"


def budget(session: Session, *, org_id: str, agent_id: str, now: datetime) -> dict[str, Any]:
    agent = find_agent(session, agent_id, org_id=org_id)
    policy = current_policy(session, agent.id)
    spent_atomic, _ = spent_since(session, agent_id=agent.id, since=utc_day_start(now), now=now)
    spent = atomic_to_usd(spent_atomic)
    remaining = max(policy.daily_cap_usd - spent, Decimal(0))
    return {
        "agentId": agent.id,
        "spentTodayUsd": format_usd(spent),
        "dailyCapUsd": format_usd(policy.daily_cap_usd),
        "remainingTodayUsd": format_usd(remaining),
        "maxUsdPerTx": format_usd(policy.max_usd_per_tx),
        "stepUpThresholdUsd": usd(policy.step_up_threshold_usd),
        "allowHosts": list(policy.allow_hosts),
        "catalogHosts": [],
        "capLevel": cap_level(spent, policy.daily_cap_usd),
        "network": policy.networks[0],
        "asset": "USDC",
        "dayResetsAt": isoformat(next_utc_midnight(now)),
        "policyVersion": policy.version,
        "warnings": recent_warnings(session, agent_id=agent.id, now=now),
    }
