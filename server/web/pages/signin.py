"""/login and /logout: passkey-only sign-in (usernameless) and signing out."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session
from starlette.responses import Response

from auth.passkeys import RelyingParty, authenticate, authentication_options
from auth.sessions import SESSION_COOKIE, end_session, start_session
from server.models import WebAuthnChallenge
from server.vocabulary import ChallengePurpose
from server.web.pages.ceremonies import claimed, options_answer, read_answer
from server.web.pages.common import Visit
from server.web.pages.destinations import after_sign_in

SIGNED_OUT = {
    "everywhere": "You are signed out on every device.",
    "passkey_removed": (
        "The passkey was removed. You had signed in with it here, so you are signed out: "
        "sign in with another of your passkeys."
    ),
}


async def login_page(visit: Visit) -> Response:
    target = after_sign_in(visit.request.query_params.get("next"), origin=visit.services.settings.pages_url)
    if visit.signed_in is not None:
        return visit.redirect(target, status=302)
    signed_out = visit.request.query_params.get("signed_out")
    notice = SIGNED_OUT.get(signed_out, "You are signed out.") if signed_out else None
    return visit.render("login.html", {"title": "Sign in", "next": target, "notice": notice})


async def login_options(visit: Visit) -> Response:
    await read_answer(visit)
    services = visit.services

    ceremony = await services.db.writing(
        authentication_options, rp=services.relying_party, now=services.clock.now()
    )
    return visit.json(options_answer(visit, ceremony))


def _sign_in(
    session: Session,
    *,
    rp: RelyingParty,
    challenge: WebAuthnChallenge,
    credential: object,
    ttl_seconds: int,
    now: datetime,
) -> str:
    """One unit of work: the passkey's answer is checked and the session it opens is started."""
    member, passkey = authenticate(session, rp=rp, challenge=challenge, credential=credential, now=now)
    return start_session(session, member=member, passkey_id=passkey.id, ttl_seconds=ttl_seconds, now=now)


async def login_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    challenge = await claimed(visit, body, ChallengePurpose.SIGN_IN)
    services = visit.services

    secret = await services.db.writing(
        _sign_in,
        rp=services.relying_party,
        challenge=challenge,
        credential=body.get("credential"),
        ttl_seconds=services.settings.session_ttl,
        now=services.clock.now(),
    )
    given = body.get("next")
    target = after_sign_in(given if isinstance(given, str) else None, origin=services.settings.pages_url)
    return visit.start_session(secret, visit.json({"redirect": target}))


async def logout_page(visit: Visit) -> Response:
    if visit.signed_in is None:
        return visit.redirect("/login", status=302)
    return visit.render("logout.html", {"title": "Sign out"})


async def logout(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services

    await services.db.writing(end_session, visit.session_secret, now=services.clock.now())
    visit.cookies_to_clear.append(SESSION_COOKIE)
    return visit.redirect("/login?signed_out=1")
