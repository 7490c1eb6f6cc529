"""/enroll/{token}: a new member creates their first passkey from the one-time link, and is
signed in."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session
from starlette.responses import Response

from auth.passkeys import (
    Ceremony,
    RelyingParty,
    member_for_enrollment,
    register_passkey,
    registration_options,
)
from auth.principal import Principal
from auth.sessions import start_session
from server.models import Member, WebAuthnChallenge
from server.tenancy.service import find_org
from server.vocabulary import ChallengePurpose
from server.web.pages.ceremonies import claimed, options_answer, read_answer
from server.web.pages.common import Visit
from server.web.pages.destinations import HOME


def _token(visit: Visit) -> str:
    return str(visit.request.path_params["token"])


def _enrolling_member(session: Session, token: str, *, now: datetime) -> tuple[Member, str]:
    """The member the enrolment link is for, and their organisation's name."""
    member = member_for_enrollment(session, token, now=now)
    org = find_org(session, Principal.for_member(org_id=member.org_id, member_id=member.id), member.org_id)
    return member, org.name


async def enroll_page(visit: Visit) -> Response:
    services = visit.services
    token = _token(visit)

    member, org_name = await services.db.reading(_enrolling_member, token, now=services.clock.now())
    return visit.render(
        "enroll.html",
        {"title": "Create your passkey", "email": member.email, "org_name": org_name, "token": token},
    )


async def enroll_options(visit: Visit) -> Response:
    await read_answer(visit)
    services = visit.services
    token = _token(visit)

    ceremony = await services.db.writing(
        _enrolment_options, token, rp=services.relying_party, now=services.clock.now()
    )
    return visit.json(options_answer(visit, ceremony))


def _enrolment_options(session: Session, token: str, *, rp: RelyingParty, now: datetime) -> Ceremony:
    member = member_for_enrollment(session, token, now=now)
    return registration_options(session, rp=rp, member=member, purpose=ChallengePurpose.ENROLL, now=now)


def _enroll(
    session: Session,
    token: str,
    *,
    rp: RelyingParty,
    challenge: WebAuthnChallenge,
    credential: object,
    name: object,
    ttl_seconds: int,
    now: datetime,
) -> str:
    """One unit of work: the member's first passkey is registered and their first session started."""
    member = member_for_enrollment(session, token, now=now)
    passkey = register_passkey(
        session, rp=rp, member=member, challenge=challenge, credential=credential, name=name, now=now
    )
    return start_session(session, member=member, passkey_id=passkey.id, ttl_seconds=ttl_seconds, now=now)


async def enroll_verify(visit: Visit) -> Response:
    body = await read_answer(visit)
    challenge = await claimed(visit, body, ChallengePurpose.ENROLL)
    services = visit.services
    token = _token(visit)

    secret = await services.db.writing(
        _enroll,
        token,
        rp=services.relying_party,
        challenge=challenge,
        credential=body.get("credential"),
        name=body.get("name"),
        ttl_seconds=services.settings.session_ttl,
        now=services.clock.now(),
    )
    return visit.start_session(secret, visit.json({"redirect": f"{HOME}?welcome=1"}))
