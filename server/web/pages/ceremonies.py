"""The JSON side of passkey pages: the page asks for a challenge's options, the browser answers,
the page posts the answer. Both posts carry the form's CSRF token and count against the sign-in
rate limit. A challenge is used up in its own unit of work before its answer is checked."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import Response

from auth import rate_limits, step_up
from auth.errors import ChallengeExpired, PasskeyCheckFailed
from auth.passkeys import Ceremony, claim_challenge
from server.kit.errors import InputReason, InvalidInput
from server.models import WebAuthnChallenge
from server.vocabulary import ChallengePurpose, StepUpAction
from server.web.http import count, json_body
from server.web.pages.common import Visit


async def read_answer(visit: Visit) -> dict[str, Any]:
    """The posted JSON, after its CSRF token and the rate limit were checked. The request is
    counted before its body is read, so a flood of bodies, large or not, meets the limit first."""
    await count(visit.request, rate_limits.sign_in(visit.services.settings.rate_limit_sign_in))
    body = await json_body(visit.request)
    if not isinstance(body, dict):
        raise PasskeyCheckFailed()
    visit.check_csrf(body.get("csrf"))
    return body


def decision_of(body: dict[str, Any], *, no: str) -> bool:
    """A decision posted by a page's buttons: `approve`, or its `no` word (`deny`, `reject`)."""
    value = body.get("decision")
    if value == "approve":
        return True
    if value == no:
        return False
    raise InvalidInput(InputReason.INVALID_DECISION)


def options_answer(visit: Visit, ceremony: Ceremony) -> dict[str, Any]:
    return {"challengeId": ceremony.challenge_id, "publicKey": json.loads(ceremony.options_json)}


async def claimed(visit: Visit, body: dict[str, Any], purpose: ChallengePurpose) -> WebAuthnChallenge:
    services = visit.services
    return await services.db.writing(
        claim_challenge, body.get("challengeId"), purpose=purpose, now=services.clock.now()
    )


async def begin_step_up(visit: Visit, action: StepUpAction) -> Response:
    """Options for a fresh assertion by one of the member's own passkeys, bound to `action` and to
    this browser session (auth/step_up.py)."""
    await read_answer(visit)
    services = visit.services
    ceremony = await services.db.writing(
        step_up.begin,
        rp=services.relying_party,
        signed_in=visit.member,
        action=action,
        now=services.clock.now(),
    )
    return visit.json(options_answer(visit, ceremony))


async def finish_step_up(visit: Visit, action: StepUpAction, **complete: Any) -> tuple[dict[str, Any], Any]:
    """Check the answer to a step-up begun for `action`: the request's body, and what
    `step_up.complete` made of it. A challenge begun for another action is refused."""
    body = await read_answer(visit)
    services = visit.services
    signed_in = visit.member
    now = services.clock.now()
    # Two units of work: the challenge is spent even if the answer to it is then refused.
    claimed = await services.db.writing(step_up.claim, body.get("challengeId"), signed_in=signed_in, now=now)
    if claimed.action != action:
        raise ChallengeExpired()
    done = await services.db.writing(
        step_up.complete,
        rp=services.relying_party,
        signed_in=signed_in,
        step_up=claimed,
        credential=body.get("credential"),
        now=now,
        **complete,
    )
    return body, done
