"""/admin: where a signed-in member lands: who they are, the agents they may connect to an MCP
client, and how to connect one. (/ leads here too.)"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from auth.consent import delegable_agents
from auth.sessions import SignedIn
from server.approvals.service import pending_for_decider
from server.models import Agent
from server.tenancy.service import find_org
from server.web.pages.common import Visit
from server.web.pages.destinations import HOME


def _home_of(session: Session, signed_in: SignedIn, now: datetime) -> tuple[str, list[Agent], int]:
    """The organisation's name, the agents the member may connect, how many approvals wait."""
    org = find_org(session, signed_in.principal, signed_in.member.org_id)
    waiting = pending_for_decider(session, signed_in.principal, member=signed_in.member, now=now)
    return org.name, delegable_agents(session, signed_in), len(waiting)


async def show(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member

    org_name, agents, waiting = await services.db.reading(_home_of, signed_in, services.clock.now())
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
        },
    )


async def root(_request: Request) -> Response:
    return RedirectResponse(HOME, status_code=302)
