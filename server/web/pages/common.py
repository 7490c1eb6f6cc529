"""What every page shares: who is visiting (their session, or an anonymous browser cookie), the
CSRF token of their forms, templates, cookies and security headers, and errors as sentences.

Pages live at the pages origin (`Settings.pages_url`): a page asked for on another host (a
loopback address, when the public URL is one) is redirected there, because passkeys and the
session cookie belong to that host name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from auth import errors
from auth.scopes import scope_words
from auth.sessions import BROWSER_COOKIE, SESSION_COOKIE, SignedIn, new_browser_secret, resolve_session
from auth.tokens import TokenNotFound
from server.approvals.errors import (
    ApprovalNotFound,
    ApprovalNotPending,
    PolicyChangeAltered,
    PolicyChangedMeanwhile,
    PolicyChangeForbidden,
    PolicyChangeNotFound,
    PolicyChangeNotPending,
    PolicyChangeOutdated,
)
from server.kit.bodies import RequestTooLarge
from server.kit.errors import NotFound, PaywardenError
from server.kit.networks import network_name
from server.services import Services
from server.tenancy.changes import ChangeNotFound, ChangeNotPending, ConfirmForbidden
from server.tenancy.service import LastOwner, MemberNotFound, NameTaken
from server.web.http import NO_STORE, services_of

TEMPLATES = Jinja2Templates(directory=Path(__file__).resolve().parents[1] / "templates")
# Pages name networks and permissions as people say them, never by their ids alone.
TEMPLATES.env.filters["network_name"] = network_name
TEMPLATES.env.filters["scope_words"] = scope_words
BROWSER_COOKIE_AGE = 365 * 24 * 3600

SECURITY_HEADERS = {
    # No form-action: the consent form's answer redirects to the application's own address.
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    **NO_STORE,
}

# How an error's code becomes an HTTP status on a page.
_STATUS = {
    errors.CsrfFailed.code: 403,
    errors.RateLimited.code: 429,
    errors.EnrollmentLinkInvalid.code: 410,
    errors.MemberDisabled.code: 403,
    errors.LastPasskey.code: 409,
    errors.StepUpRequired.code: 403,
    errors.AgentNotDelegable.code: 403,
    errors.ScopeNotGrantable.code: 403,
    errors.RevokeForbidden.code: 403,
    errors.SignInRequired.code: 401,
    errors.PasskeyNotFound.code: 404,
    errors.ConnectionNotFound.code: 404,
    NotFound.code: 404,
    ApprovalNotFound.code: 404,
    ApprovalNotPending.code: 409,
    PolicyChangeNotFound.code: 404,
    PolicyChangeNotPending.code: 409,
    PolicyChangeForbidden.code: 403,
    PolicyChangeOutdated.code: 409,
    PolicyChangedMeanwhile.code: 409,
    PolicyChangeAltered.code: 409,
    ChangeNotFound.code: 404,
    ChangeNotPending.code: 409,
    ConfirmForbidden.code: 403,
    RequestTooLarge.code: 413,
    MemberNotFound.code: 404,
    LastOwner.code: 409,
    NameTaken.code: 409,
    TokenNotFound.code: 404,
}


def status_of(error: PaywardenError) -> int:
    return _STATUS.get(error.code, 400)


@dataclass
class Visit:
    """One request to a page: the services, the visitor, and what to add to the response."""

    request: Request
    services: Services
    signed_in: SignedIn | None
    session_secret: str | None
    browser_secret: str
    new_browser_cookie: bool
    cookies_to_clear: list[str] = field(default_factory=list)

    @property
    def anchor(self) -> str:
        """What this browser's CSRF tokens are bound to."""
        return self.session_secret if self.signed_in and self.session_secret else self.browser_secret

    @property
    def csrf_token(self) -> str:
        return self.services.csrf.token(self.anchor)

    def check_csrf(self, given: object) -> None:
        self.services.csrf.check(self.anchor, given if isinstance(given, str) else None)

    @property
    def member(self) -> SignedIn:
        if self.signed_in is None:
            raise errors.SignInRequired()
        return self.signed_in

    def finish(self, response: Response) -> Response:
        settings = self.services.settings
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if self.new_browser_cookie:
            response.set_cookie(
                BROWSER_COOKIE,
                self.browser_secret,
                max_age=BROWSER_COOKIE_AGE,
                httponly=True,
                secure=settings.secure_cookies,
                samesite="lax",
                path="/",
            )
        for name in self.cookies_to_clear:
            response.delete_cookie(
                name, path="/", secure=settings.secure_cookies, httponly=True, samesite="lax"
            )
        return response

    def start_session(self, secret: str, response: Response) -> Response:
        settings = self.services.settings
        response.set_cookie(
            SESSION_COOKIE,
            secret,
            max_age=settings.session_ttl,
            httponly=True,
            secure=settings.secure_cookies,
            samesite="lax",
            path="/",
        )
        return response

    def render(
        self, template: str, context: Mapping[str, Any] | None = None, *, status: int = 200
    ) -> Response:
        settings = self.services.settings
        values = {
            "member": self.signed_in.member if self.signed_in else None,
            "csrf": self.csrf_token,
            "mcp_url": settings.mcp_url,
            **(context or {}),
        }
        return self.finish(TEMPLATES.TemplateResponse(self.request, template, values, status_code=status))

    def message(
        self, title: str, sentence: str, *, status: int, link: tuple[str, str] | None = None
    ) -> Response:
        return self.render(
            "message.html", {"title": title, "sentence": sentence, "link": link}, status=status
        )

    def error_page(self, error: PaywardenError, *, link: tuple[str, str] | None = None) -> Response:
        return self.message(
            "Something needs your attention", error.describe(), status=status_of(error), link=link
        )

    def redirect(self, url: str, *, status: int = 303) -> Response:
        return self.finish(RedirectResponse(url, status_code=status))

    def json(self, body: Mapping[str, Any], *, status: int = 200) -> Response:
        return self.finish(JSONResponse(dict(body), status_code=status))

    def json_error(self, error: PaywardenError) -> Response:
        response = self.json({"error": error.code, "message": error.describe()}, status=status_of(error))
        retry = error.extra.get("retry_after")
        if retry is not None:
            response.headers["Retry-After"] = str(retry)
        return response


async def visit(request: Request) -> Visit:
    services = services_of(request)
    session_secret = request.cookies.get(SESSION_COOKIE)
    browser = request.cookies.get(BROWSER_COOKIE)
    now = services.clock.now()

    signed_in = (
        await services.db.reading(resolve_session, session_secret, now=now) if session_secret else None
    )
    fresh = browser is None or not 20 <= len(browser) <= 100
    current = Visit(
        request=request,
        services=services,
        signed_in=signed_in,
        session_secret=session_secret if signed_in else None,
        browser_secret=new_browser_secret() if fresh else str(browser),
        new_browser_cookie=fresh,
    )
    if session_secret and signed_in is None:
        current.cookies_to_clear.append(SESSION_COOKIE)
    return current


def on_pages_host(request: Request, settings_pages_url: str) -> Response | None:
    """A redirect to the same page on the pages' host, when asked for on another host."""
    pages = urlsplit(settings_pages_url)
    if request.url.netloc == pages.netloc:
        return None
    target = f"{pages.scheme}://{pages.netloc}{request.url.path}"
    if request.url.query:
        target += f"?{request.url.query}"
    return RedirectResponse(target, status_code=307 if request.method != "GET" else 302)


PageHandler = Callable[[Visit], Awaitable[Response]]


def page(
    handler: PageHandler, *, signed_in: bool = False, json: bool = False
) -> Callable[[Request], Awaitable[Response]]:
    """A page endpoint: on the pages' host, with its visitor, and every error as a sentence.

    `signed_in` pages send a visitor without a session to sign in, and back afterwards."""

    async def endpoint(request: Request) -> Response:
        services = services_of(request)
        moved = on_pages_host(request, services.settings.pages_url)
        if moved is not None:
            return moved
        current = await visit(request)
        if signed_in and current.signed_in is None:
            if json:
                return current.json_error(errors.SignInRequired())
            return current.redirect(sign_in_url(request), status=302)
        try:
            return await handler(current)
        except PaywardenError as error:
            return current.json_error(error) if json else current.error_page(error)

    return endpoint


def sign_in_url(request: Request) -> str:
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"/login?next={quote(here, safe='')}"
