"""The JSON side of passkey pages: the page asks for a challenge's options, the browser answers,
the page posts the answer. Both posts carry the form's CSRF token and count against the sign-in
rate limit. A challenge is used up in its own unit of work before its answer is checked."""

from __future__ import annotations

import json
from typing import Any

from auth import rate_limits
from auth.errors import PasskeyCheckFailed
from auth.passkeys import Ceremony, claim_challenge
from server.models import WebAuthnChallenge
from server.vocabulary import ChallengePurpose
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


def options_answer(visit: Visit, ceremony: Ceremony) -> dict[str, Any]:
    return {"challengeId": ceremony.challenge_id, "publicKey": json.loads(ceremony.options_json)}


async def claimed(visit: Visit, body: dict[str, Any], purpose: ChallengePurpose) -> WebAuthnChallenge:
    services = visit.services
    return await services.db.writing(
        claim_challenge, body.get("challengeId"), purpose=purpose, now=services.clock.now()
    )
