"""/account/passkeys: a member's passkeys; add one (after a step-up with a passkey they already
have: the session alone is not enough), rename one, remove one (never the last); and sign out
everywhere."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session
from starlette.responses import Response

from auth import step_up
from auth.errors import LastPasskey
from auth.passkeys import (
    Ceremony,
    RelyingParty,
    claim_challenge,
    passkeys_of,
    register_passkey,
    registration_options,
    remove_passkey,
    rename_passkey,
)
from auth.sessions import SESSION_COOKIE, SignedIn, end_all_sessions
from server.models import MemberPasskey
from server.vocabulary import ChallengePurpose, StepUpAction
from server.web.pages.ceremonies import begin_step_up, finish_step_up, options_answer, read_answer
from server.web.pages.common import Visit

PATH = "/account/passkeys"
NOTICES = {
    "added": "Your new passkey is ready.",
    "renamed": "The passkey was renamed.",
    "removed": "The passkey was removed. It can no longer sign in to Paywarden.",
}


async def _list(visit: Visit) -> list[MemberPasskey]:
    return await visit.services.db.reading(passkeys_of, visit.member.principal)


async def passkeys_page(visit: Visit, *, error: str | None = None, status: int = 200) -> Response:
    notice = NOTICES.get(visit.request.query_params.get("done", ""))
    return visit.render(
        "passkeys.html",
        {
            "title": "Your passkeys",
            "nav": "passkeys",
            "passkeys": await _list(visit),
            "notice": notice,
            "error": error,
        },
        status=status,
    )


async def show(visit: Visit) -> Response:
    return await passkeys_page(visit)


async def step_up_options(visit: Visit) -> Response:
    """The first half of adding a passkey: a challenge for one of the member's own passkeys."""
    return await begin_step_up(visit, StepUpAction.ADD_PASSKEY)


async def step_up_verify(visit: Visit) -> Response:
    _, step_up_id = await finish_step_up(visit, StepUpAction.ADD_PASSKEY)
    return visit.json({"stepUpId": step_up_id})


async def add_options(visit: Visit) -> Response:
    """Options for the new passkey, for a session that has just redeemed its step-up."""
    body = await read_answer(visit)
    services = visit.services
    ceremony = await services.db.writing(
        _redeem_then_offer_passkey,
        step_up_id=body.get("stepUpId"),
        signed_in=visit.member,
        rp=services.relying_party,
        now=services.clock.now(),
    )
    return visit.json(options_answer(visit, ceremony))


def _redeem_then_offer_passkey(
    session: Session, *, step_up_id: object, signed_in: SignedIn, rp: RelyingParty, now: datetime
) -> Ceremony:
    """One unit of work: the step-up is spent only if the new passkey's options are made."""
    step_up.redeem(session, step_up_id, signed_in=signed_in, action=StepUpAction.ADD_PASSKEY, now=now)
    return registration_options(
        session, rp=rp, member=signed_in.member, purpose=ChallengePurpose.ADD_PASSKEY, now=now
    )


async def add_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    now = services.clock.now()
    # Two units of work: the challenge is spent even if the answer to it is then refused.
    challenge = await services.db.writing(
        claim_challenge, body.get("challengeId"), purpose=ChallengePurpose.ADD_PASSKEY, now=now
    )
    await services.db.writing(
        register_passkey,
        rp=services.relying_party,
        member=visit.member.member,
        challenge=challenge,
        credential=body.get("credential"),
        name=body.get("name"),
        now=now,
    )
    return visit.json({"redirect": f"{PATH}?done=added"})


async def rename(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    passkey_id = str(visit.request.path_params["passkey_id"])
    await services.db.writing(
        rename_passkey,
        visit.member.principal,
        passkey_id=passkey_id,
        name=form.get("name"),
        now=services.clock.now(),
    )
    return visit.redirect(f"{PATH}?done=renamed")


async def remove(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    passkey_id = str(visit.request.path_params["passkey_id"])
    try:
        await services.db.writing(
            remove_passkey, visit.member.principal, passkey_id=passkey_id, now=services.clock.now()
        )
    except LastPasskey as error:
        return await passkeys_page(visit, error=error.describe(), status=409)
    if passkey_id == visit.member.passkey_id:
        # This session was signed in with it, so it has just ended too.
        visit.cookies_to_clear.append(SESSION_COOKIE)
        return visit.redirect("/login?signed_out=passkey_removed")
    return visit.redirect(f"{PATH}?done=removed")


async def sign_out_everywhere(visit: Visit) -> Response:
    """End every session of the member, this one included."""
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    await services.db.writing(end_all_sessions, visit.member.principal, now=services.clock.now())
    visit.cookies_to_clear.append(SESSION_COOKIE)
    return visit.redirect("/login?signed_out=everywhere")
