"""/admin: where a signed-in member lands: who they are, the agents they may connect to an MCP
client, and how to connect one. (/ leads here too.)"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from auth.consent import delegable_agents
from server.approvals.service import pending_for_decider
from server.models import Agent
from server.tenancy.service import find_org
from server.web.pages.common import Visit
from server.web.pages.destinations import HOME


async def show(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member

    def read() -> tuple[str, list[Agent], int]:
        with services.db.read() as session:
            org = find_org(session, signed_in.principal, signed_in.member.org_id)
            waiting = pending_for_decider(
                session, signed_in.principal, member=signed_in.member, now=services.clock.now()
            )
            return org.name, delegable_agents(session, signed_in), len(waiting)

    org_name, agents, waiting = await services.db.run(read)
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
