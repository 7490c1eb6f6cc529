"""/connections: the applications that may act for the organisation's agents, and revoking them."""

from __future__ import annotations

from starlette.responses import Response

from auth.connections import connections, revoke_connection
from server.web.pages.common import Visit

PATH = "/connections"


async def show(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member

    notice = (
        "The connection was revoked: its tokens no longer work."
        if visit.request.query_params.get("done")
        else None
    )
    return visit.render(
        "connections.html",
        {
            "title": "Connections",
            "nav": "connections",
            "connections": await services.db.reading(connections, signed_in),
            "notice": notice,
        },
    )


async def revoke(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    signed_in = visit.member
    grant_id = str(visit.request.path_params["grant_id"])

    await services.db.writing(revoke_connection, signed_in, grant_id=grant_id, now=services.clock.now())
    return visit.redirect(f"{PATH}?done=revoked")
