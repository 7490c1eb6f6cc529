"""What a person sees when no route answers, or something breaks: a page with a sentence (or, for
a client that does not want HTML, a small JSON error). Nothing about the failure is shown."""

from __future__ import annotations

import logging

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from server.kit.bodies import RequestTooLarge
from server.web.pages.common import SECURITY_HEADERS, TEMPLATES

log = logging.getLogger("paywarden.web")

_SENTENCES = {
    404: (
        "Page not found",
        "There is no page at this address. Check the link, or start from your home page.",
    ),
    405: ("Page not found", "This address does not answer that kind of request."),
    413: (
        "Request too large",
        "This request is too large for Paywarden to read. Reload the page and try again.",
    ),
    500: (
        "Something went wrong",
        "Paywarden ran into a problem and could not finish. Please try again in a moment.",
    ),
}


def _answer(request: Request, status: int, *, code: str | None = None) -> Response:
    title, sentence = _SENTENCES.get(status, _SENTENCES[500])
    if "text/html" not in request.headers.get("accept", ""):
        return JSONResponse(
            {"error": code or title.lower().replace(" ", "_"), "error_description": sentence},
            status_code=status,
        )
    context = {
        "title": title,
        "sentence": sentence,
        "link": ("/admin", "Go to your home page"),
        "member": None,
    }
    response = TEMPLATES.TemplateResponse(request, "message.html", context, status_code=status)
    response.headers.update(SECURITY_HEADERS)
    return response


async def http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return _answer(request, status if status in _SENTENCES else 404)


async def server_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _answer(request, 500)


async def too_large(request: Request, exc: Exception) -> Response:
    """A body over its limit, met by an endpoint that is not a page (pages say it themselves)."""
    return _answer(request, 413, code=RequestTooLarge.code)
