"""/admin: where a signed-in member lands, the dashboard's overview: today's spend of each agent
against its caps, the approvals waiting, the last 30 days' spend as a chart, the agents they may
connect to an MCP client, and how to connect one. (/ leads here too.)"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from auth.consent import delegable_agents
from auth.sessions import SignedIn
from server.approvals.service import pending_for_decider
from server.kit.money import format_usd
from server.models import Agent
from server.payments.spend import SpendOverview, spend_overview
from server.tenancy.service import find_org
from server.web.charts import Series, StackedBars, fill_of, stacked_bars, usd_label
from server.web.pages.agents import agent_url
from server.web.pages.common import Visit
from server.web.pages.destinations import HOME


def _home_of(
    session: Session, signed_in: SignedIn, now: datetime
) -> tuple[str, list[Agent], int, SpendOverview]:
    """The organisation's name, the agents the member may connect, how many approvals wait, and
    what every agent spent."""
    org = find_org(session, signed_in.principal, signed_in.member.org_id)
    waiting = pending_for_decider(session, signed_in.principal, member=signed_in.member, now=now)
    spend = spend_overview(session, signed_in.principal, now=now)
    return org.name, delegable_agents(session, signed_in), len(waiting), spend


def spend_chart(spend: SpendOverview) -> StackedBars:
    first, last = spend.days[0], spend.days[-1]
    return stacked_bars(
        spend.days,
        [Series(item.agent.name, item.by_day_atomic) for item in spend.agents],
        title=f"Spend per day, {first.isoformat()} to {last.isoformat()} (UTC)",
        description=(
            f"Bars per day, stacked by agent, {len(spend.agents)} agents, "
            f"{usd_label(spend.total_atomic)} in all. The table below has every amount."
        ),
    )


async def show(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member

    org_name, agents, waiting, spend = await services.db.reading(_home_of, signed_in, services.clock.now())
    notice = (
        "Your passkey is ready, and you are signed in." if visit.request.query_params.get("welcome") else None
    )
    return visit.render(
        "home.html",
        {
            "title": "Home",
            "nav": "home",
            "org_name": org_name,
            "agents": agents,
            "notice": notice,
            "waiting": waiting,
            "spend": spend,
            "chart": spend_chart(spend),
            "fill_of": fill_of,
            "usd": usd_label,
            "dollars": lambda amount: f"${format_usd(amount)}",
            "agent_url": agent_url,
        },
    )


async def root(_request: Request) -> Response:
    return RedirectResponse(HOME, status_code=302)
