"""Who calls the admin API: a bearer token issued for /api/v1 with `admin:read` (reads) or
`admin:write` (changes, and reads), which binds the call to the token's organisation. Counted
against the admin API's rate limit (in the database, shared by every process) before anything else
is read."""

from __future__ import annotations

from starlette.requests import Request

from auth import rate_limits
from auth.errors import RateLimited
from auth.principal import Principal, PrincipalKind
from auth.rate_limits import count_request
from auth.scopes import admin_allows
from auth.verifier import InvalidToken
from server.web.api.problems import Problem
from server.web.http import client_address, services_of

CHALLENGE = 'Bearer realm="paywarden-admin"'


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, secret = header.partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise Problem(
            401, "invalid_token", "Send an admin token as `Authorization: Bearer …`.",
            headers={"WWW-Authenticate": CHALLENGE},
        )  # fmt: skip
    return secret.strip()


def _count(request: Request, who: str) -> None:
    services = services_of(request)
    limit = rate_limits.admin_api(services.settings.rate_limit_admin_api)
    with services.db.write() as session:
        count_request(session, limit=limit, who=who, now=services.clock.now())


async def admin_principal(request: Request, *, write: bool) -> Principal:
    """The organisation's admin behind the request's token, or a Problem (401, 403 or 429).
    `write` asks for admin:write; any admin scope reads."""
    services = services_of(request)
    try:
        await services.db.run(_count, request, client_address(request))
    except RateLimited as exc:
        retry = str(exc.extra.get("retry_after", 60))
        raise Problem(429, exc.code, exc.describe(), headers={"Retry-After": retry}) from exc
    secret = _bearer(request)
    try:
        principal = await services.verifier.verify_async(
            secret, audience=services.settings.admin_api_audience
        )
    except InvalidToken as exc:
        challenge = f'{CHALLENGE}, error="invalid_token"'
        raise Problem(401, "invalid_token", exc.description, headers={"WWW-Authenticate": challenge}) from exc
    if principal.kind is not PrincipalKind.ADMIN or not admin_allows(principal.scopes, write=False):
        raise Problem(
            403, "insufficient_scope", "This token does not carry an admin scope.",
            headers={"WWW-Authenticate": f'{CHALLENGE}, error="insufficient_scope", scope="admin:read"'},
        )  # fmt: skip
    if write and not admin_allows(principal.scopes, write=True):
        raise Problem(
            403, "insufficient_scope",
            "This token may only read: a change needs a token with the admin:write scope.",
            headers={"WWW-Authenticate": f'{CHALLENGE}, error="insufficient_scope", scope="admin:write"'},
        )  # fmt: skip
    return principal
