"""/admin: where a signed-in member lands, the dashboard's overview: today's spend of each agent
against its caps, the approvals and policy changes waiting, the last 30 days' spend as a chart,
the agents they may connect to an MCP client, and how to connect one. (/ leads here too.)"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from auth.consent import delegable_agents
from auth.sessions import SignedIn
from server.approvals.policy_changes import waiting_in_org
from server.approvals.service import pending_for_decider
from server.kit.money import format_usd
from server.models import Agent, SellerCircuit
from server.payments.circuits import clear_circuit, open_circuits
from server.payments.errors import CircuitNotFound
from server.payments.spend import SpendOverview, spend_overview
from server.tenancy.service import find_org
from server.web.charts import Series, StackedBars, fill_of, stacked_bars, usd_label
from server.web.pages.agents import agent_url, may_manage
from server.web.pages.common import Visit
from server.web.pages.destinations import HOME
from server.web.pages.sudo import has_fresh_sudo, sudo_url

CLEAR_PATH = "/admin/circuits/clear"


@dataclass(frozen=True)
class Overview:
    org_name: str
    agents: list[Agent]  # the agents the member may connect
    waiting: int  # approvals waiting for the member
    spend: SpendOverview
    circuits: list[SellerCircuit]  # seller hosts the organisation blocked
    changes_waiting: int  # policy changes agents asked for, waiting for an owner or admin


def _home_of(session: Session, signed_in: SignedIn, now: datetime) -> Overview:
    """The organisation's name, the agents the member may connect, how many approvals wait, what
    every agent spent, and the seller circuits open."""
    org = find_org(session, signed_in.principal, signed_in.member.org_id)
    waiting = pending_for_decider(session, signed_in.principal, member=signed_in.member, now=now)
    spend = spend_overview(session, signed_in.principal, now=now)
    circuits = open_circuits(session, signed_in.principal, now=now)
    changes = waiting_in_org(session, signed_in.principal, member=signed_in.member, now=now)
    return Overview(
        org.name, delegable_agents(session, signed_in), len(waiting), spend, circuits, len(changes)
    )


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

    overview = await services.db.reading(_home_of, signed_in, services.clock.now())
    spend = overview.spend
    notice = (
        "Your passkey is ready, and you are signed in." if visit.request.query_params.get("welcome") else None
    )
    return visit.render(
        "home.html",
        {
            "title": "Home",
            "nav": "home",
            "org_name": overview.org_name,
            "agents": overview.agents,
            "notice": notice,
            "waiting": overview.waiting,
            "changes_waiting": overview.changes_waiting,
            "circuits": overview.circuits,
            "may_clear": may_manage(signed_in),
            "spend": spend,
            "chart": spend_chart(spend),
            "fill_of": fill_of,
            "usd": usd_label,
            "dollars": lambda amount: f"${format_usd(amount)}",
            "agent_url": agent_url,
        },
    )


async def clear(visit: Visit) -> Response:
    """An owner or admin clears a seller's circuit: payments to the host may resume."""
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    signed_in = visit.member
    if not may_manage(signed_in):
        return visit.message(
            "Your role cannot clear a blocked seller",
            f"You are a {signed_in.member.role} of this organisation: only an owner or an admin can "
            "let its agents pay a blocked seller again.",
            status=403,
            link=(HOME, "Back to the overview"),
        )
    if not await has_fresh_sudo(visit):  # payments to the host resume: that widens
        return visit.redirect(sudo_url(HOME))
    host = str(form.get("host") or "")
    services = visit.services
    try:
        await services.db.writing(clear_circuit, signed_in.principal, host=host, now=services.clock.now())
    except CircuitNotFound as error:
        return visit.error_page(error, link=(HOME, "Back to the overview"))
    return visit.redirect(HOME)


async def root(_request: Request) -> Response:
    return RedirectResponse(HOME, status_code=302)
