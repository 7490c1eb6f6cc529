"""What every admin API route shares: the endpoint wrapper (principal, document, problem), the
request body, query parameters and the unit of work a handler runs its service in."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, TypeVar

from pydantic import BaseModel, ValidationError
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auth.principal import Principal
from server.kit.errors import PaywardenError
from server.web.api.access import admin_principal
from server.web.api.problems import Problem
from server.web.http import NO_STORE, services_of

log = logging.getLogger(__name__)

MAX_PAGE = 200
DEFAULT_PAGE = 50

P = ParamSpec("P")
T = TypeVar("T")
Handler = Callable[[Request, Principal], Awaitable[BaseModel | Response]]
M = TypeVar("M", bound=BaseModel)


# Services raise their own errors; the API answers each with the status its code means.
CONFLICTS = frozenset({"last_owner"})
FORBIDDEN = frozenset({"sudo_required"})
SERVER_SIDE = {"internal_error": 500, "control_plane_unavailable": 503}  # nothing the caller did


def status_of(error: PaywardenError) -> int:
    """5xx for what failed on the server's side, 404 for what is not in the organisation, 403 for
    a change this token may not make alone, 409 for a change the state refuses, else 400."""
    if error.code in SERVER_SIDE:
        return SERVER_SIDE[error.code]
    if error.code.endswith("_not_found"):
        return 404
    if error.code in FORBIDDEN:
        return 403
    return 409 if error.code in CONFLICTS else 400


def endpoint(handler: Handler, *, write: bool, status: int = 200) -> Callable[[Request], Awaitable[Response]]:
    """A route: the admin's principal first (admin:write for a change), the document as JSON,
    every error a problem."""

    async def answer(request: Request) -> Response:
        try:
            principal = await admin_principal(request, write=write)
            document = await handler(request, principal)
        except Problem as problem:
            return problem.response()
        except PaywardenError as error:
            reason = error.extra.get("reason")
            detail = f"{error.describe()} Reason: {reason}." if isinstance(reason, str) else error.describe()
            return Problem(status_of(error), error.code, detail).response()
        except Exception:
            log.exception("admin API %s %s failed", request.method, request.url.path)
            return Problem(
                500, "internal_error", "The server failed to answer; nothing was changed."
            ).response()
        if isinstance(document, Response):
            return document
        return JSONResponse(document.model_dump(mode="json"), status_code=status, headers=NO_STORE)

    return answer


async def body_of(request: Request, model: type[M]) -> M:
    """The request's JSON body as `model`, or a 400 problem that says what is wrong."""
    raw = await request.body()
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise Problem(400, "invalid_body", f"The body is not valid at `{where}`: {first['msg']}.") from exc


async def reading(
    request: Request, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    return await services_of(request).db.reading(fn, *args, **kwargs)


async def writing(
    request: Request, fn: Callable[Concatenate[Session, P], T], *args: P.args, **kwargs: P.kwargs
) -> T:
    return await services_of(request).db.writing(fn, *args, **kwargs)


def instant(request: Request, name: str) -> datetime | None:
    text = request.query_params.get(name)
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise Problem(400, "invalid_input", f"`{name}` must be an ISO 8601 time.") from exc
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def page_size(request: Request) -> int:
    text = request.query_params.get("limit")
    if text is None:
        return DEFAULT_PAGE
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE:
        raise Problem(400, "invalid_input", f"`limit` must be a whole number from 1 to {MAX_PAGE}.")
    return int(text)


def path(request: Request, name: str) -> str:
    return str(request.path_params[name])


def now_of(request: Request) -> datetime:
    return services_of(request).clock.now()
