"""/account/passkeys: a member's passkeys; add one (after a step-up with a passkey they already
have: the session alone is not enough), rename one, remove one (never the last); and sign out
everywhere."""

from __future__ import annotations

from starlette.responses import Response

from auth import step_up
from auth.errors import LastPasskey
from auth.passkeys import (
    Ceremony,
    claim_challenge,
    passkeys_of,
    register_passkey,
    registration_options,
    remove_passkey,
    rename_passkey,
)
from auth.sessions import SESSION_COOKIE, end_all_sessions
from server.models import MemberPasskey
from server.vocabulary import ChallengePurpose, StepUpAction
from server.web.pages.ceremonies import options_answer, read_answer
from server.web.pages.common import Visit

PATH = "/account/passkeys"
NOTICES = {
    "added": "Your new passkey is ready.",
    "renamed": "The passkey was renamed.",
    "removed": "The passkey was removed. It can no longer sign in to Paywarden.",
}


async def _list(visit: Visit) -> list[MemberPasskey]:
    services = visit.services
    principal = visit.member.principal

    def read() -> list[MemberPasskey]:
        with services.db.read() as session:
            return passkeys_of(session, principal)

    return await services.db.run(read)


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
    await read_answer(visit)
    services = visit.services
    signed_in = visit.member

    def start() -> Ceremony:
        with services.db.write() as session:
            return step_up.begin(
                session,
                rp=services.relying_party,
                signed_in=signed_in,
                action=StepUpAction.ADD_PASSKEY,
                now=services.clock.now(),
            )

    return visit.json(options_answer(visit, await services.db.run(start)))


async def step_up_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member

    def check() -> str:
        now = services.clock.now()
        with services.db.write() as session:
            claimed = step_up.claim(session, body.get("challengeId"), signed_in=signed_in, now=now)
        with services.db.write() as session:
            return step_up.complete(
                session,
                rp=services.relying_party,
                signed_in=signed_in,
                step_up=claimed,
                credential=body.get("credential"),
                now=now,
            )

    return visit.json({"stepUpId": await services.db.run(check)})


async def add_options(visit: Visit) -> Response:
    """Options for the new passkey, for a session that has just redeemed its step-up."""
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    member = signed_in.member

    def start() -> Ceremony:
        now = services.clock.now()
        with services.db.write() as session:
            step_up.redeem(
                session, body.get("stepUpId"), signed_in=signed_in, action=StepUpAction.ADD_PASSKEY, now=now
            )
            return registration_options(
                session,
                rp=services.relying_party,
                member=member,
                purpose=ChallengePurpose.ADD_PASSKEY,
                now=now,
            )

    return visit.json(options_answer(visit, await services.db.run(start)))


async def add_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    services = visit.services
    member = visit.member.member

    def add() -> None:
        now = services.clock.now()
        with services.db.write() as session:
            challenge = claim_challenge(
                session, body.get("challengeId"), purpose=ChallengePurpose.ADD_PASSKEY, now=now
            )
        with services.db.write() as session:
            register_passkey(
                session,
                rp=services.relying_party,
                member=member,
                challenge=challenge,
                credential=body.get("credential"),
                name=body.get("name"),
                now=now,
            )

    await services.db.run(add)
    return visit.json({"redirect": f"{PATH}?done=added"})


async def rename(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    principal = visit.member.principal
    passkey_id = str(visit.request.path_params["passkey_id"])

    def change() -> None:
        with services.db.write() as session:
            rename_passkey(
                session, principal, passkey_id=passkey_id, name=form.get("name"), now=services.clock.now()
            )

    await services.db.run(change)
    return visit.redirect(f"{PATH}?done=renamed")


async def remove(visit: Visit) -> Response:
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    services = visit.services
    principal = visit.member.principal
    passkey_id = str(visit.request.path_params["passkey_id"])

    def delete() -> None:
        with services.db.write() as session:
            remove_passkey(session, principal, passkey_id=passkey_id, now=services.clock.now())

    try:
        await services.db.run(delete)
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
    principal = visit.member.principal

    def end_all() -> None:
        with services.db.write() as session:
            end_all_sessions(session, principal, now=services.clock.now())

    await services.db.run(end_all)
    visit.cookies_to_clear.append(SESSION_COOKIE)
    return visit.redirect("/login?signed_out=everywhere")
