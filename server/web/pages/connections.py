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


async def confirm_revoke(visit: Visit) -> Response:
    """Revoking asks once: this page says what stops, and its button posts the revocation."""
    services = visit.services
    grant_id = str(visit.request.path_params["grant_id"])
    found = [
        item
        for item in await services.db.reading(connections, visit.member)
        if item.grant.id == grant_id and item.may_revoke
    ]
    if not found:
        return visit.message(
            "No connection here",
            "There is no connection at this address that you may revoke.",
            status=404,
            link=(PATH, "See your connections"),
        )
    item = found[0]
    return visit.render(
        "revoke.html", {"title": f"Revoke {item.client_name}?", "nav": "connections", "item": item}
    )


async def revoke(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    signed_in = visit.member
    grant_id = str(visit.request.path_params["grant_id"])

    await services.db.writing(revoke_connection, signed_in, grant_id=grant_id, now=services.clock.now())
    return visit.redirect(f"{PATH}?done=revoked")
