"""/account/sudo?next=PATH: confirm with a passkey before a change that widens authority.

A session cookie opens every page, but raising a cap, adding a host, issuing a token, inviting a
member or giving a higher role also needs a user-verified assertion by one of the member's own
passkeys, made in this browser session within `PAYWARDEN_SUDO_SECONDS`. This page runs that
ceremony (a sudo step-up: auth/step_up.py) and returns to `next`, a path on this site only (the
same check as sign-in's). A page handler that makes a widening change calls `sudo_or_redirect`
first: None when the session's sudo is fresh, else a redirect here that comes back.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.responses import Response

from auth import step_up
from server.vocabulary import StepUpAction
from server.web.pages.ceremonies import begin_step_up, finish_step_up
from server.web.pages.common import Visit
from server.web.pages.destinations import after_sign_in

PATH = "/account/sudo"


def _next(visit: Visit, given: object) -> str:
    return after_sign_in(given if isinstance(given, str) else None, origin=visit.services.settings.pages_url)


def sudo_url(next_path: str) -> str:
    """The sudo page that returns to `next_path` afterwards."""
    return f"{PATH}?next={quote(next_path, safe='')}"


async def has_fresh_sudo(visit: Visit) -> bool:
    signed_in = visit.member
    services = visit.services
    return await services.db.reading(
        step_up.has_recent_sudo,
        member_id=signed_in.member.id,
        session_id=signed_in.session_id,
        now=services.clock.now(),
    )


async def sudo_or_redirect(visit: Visit, *, next_path: str | None = None) -> Response | None:
    """None when this session confirmed a sudo recently; otherwise a redirect to the sudo page,
    which comes back to `next_path` (by default this request's path and query: give the page that
    holds the form when the request is a POST)."""
    if await has_fresh_sudo(visit):
        return None
    request = visit.request
    here = next_path or request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return visit.redirect(sudo_url(_next(visit, here)))


async def show(visit: Visit) -> Response:
    target = _next(visit, visit.request.query_params.get("next"))
    fresh = await has_fresh_sudo(visit)
    minutes = max(1, visit.services.settings.sudo_seconds // 60)
    return visit.render(
        "sudo.html",
        {"title": "Confirm it is you", "next": target, "fresh": fresh, "minutes": minutes},
    )


async def options(visit: Visit) -> Response:
    return await begin_step_up(visit, StepUpAction.SUDO)


async def verify(visit: Visit) -> Response:
    body, _ = await finish_step_up(
        visit, StepUpAction.SUDO, sudo_seconds=visit.services.settings.sudo_seconds
    )
    return visit.json({"redirect": _next(visit, body.get("next"))})
