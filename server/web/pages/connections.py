"""/connections: the applications that may act for the organisation's agents, and revoking them."""

from __future__ import annotations

from starlette.responses import Response

from auth.connections import Connection, connections, revoke_connection
from server.web.pages.common import Visit

PATH = "/connections"


async def show(visit: Visit) -> Response:
    services = visit.services
    signed_in = visit.member

    def read() -> list[Connection]:
        with services.db.read() as session:
            return connections(session, signed_in)

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
            "connections": await services.db.run(read),
            "notice": notice,
        },
    )


async def revoke(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    signed_in = visit.member
    grant_id = str(visit.request.path_params["grant_id"])

    def change() -> None:
        with services.db.write() as session:
            revoke_connection(session, signed_in, grant_id=grant_id, now=services.clock.now())

    await services.db.run(change)
    return visit.redirect(f"{PATH}?done=revoked")
