"""/enroll/{token}: a new member creates their first passkey from the one-time link, and is
signed in."""

from __future__ import annotations

from starlette.responses import Response

from auth.passkeys import Ceremony, member_for_enrollment, register_passkey, registration_options
from auth.principal import Principal
from auth.sessions import start_session
from server.models import Member
from server.tenancy.service import find_org
from server.vocabulary import ChallengePurpose
from server.web.pages.ceremonies import claimed, options_answer, read_answer
from server.web.pages.common import Visit
from server.web.pages.destinations import HOME


def _token(visit: Visit) -> str:
    return str(visit.request.path_params["token"])


async def enroll_page(visit: Visit) -> Response:
    services = visit.services
    token = _token(visit)

    def read() -> tuple[Member, str]:
        with services.db.read() as session:
            member = member_for_enrollment(session, token, now=services.clock.now())
            org = find_org(
                session, Principal.for_member(org_id=member.org_id, member_id=member.id), member.org_id
            )
            return member, org.name

    member, org_name = await services.db.run(read)
    return visit.render(
        "enroll.html",
        {"title": "Create your passkey", "email": member.email, "org_name": org_name, "token": token},
    )


async def enroll_options(visit: Visit) -> Response:
    await read_answer(visit)
    services = visit.services
    token = _token(visit)

    def start() -> Ceremony:
        now = services.clock.now()
        with services.db.write() as session:
            member = member_for_enrollment(session, token, now=now)
            return registration_options(
                session, rp=services.relying_party, member=member, purpose=ChallengePurpose.ENROLL, now=now
            )

    return visit.json(options_answer(visit, await services.db.run(start)))


async def enroll_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    challenge = await claimed(visit, body, ChallengePurpose.ENROLL)
    services = visit.services
    token = _token(visit)

    def enroll() -> str:
        now = services.clock.now()
        with services.db.write() as session:
            member = member_for_enrollment(session, token, now=now)
            passkey = register_passkey(
                session,
                rp=services.relying_party,
                member=member,
                challenge=challenge,
                credential=body.get("credential"),
                name=body.get("name"),
                now=now,
            )
            return start_session(
                session,
                member=member,
                passkey_id=passkey.id,
                ttl_seconds=services.settings.session_ttl,
                now=now,
            )

    secret = await services.db.run(enroll)
    return visit.start_session(secret, visit.json({"redirect": f"{HOME}?welcome=1"}))
