"""The authorization server's HTTP endpoints: /oauth/register, /oauth/authorize (and its consent
page), /oauth/token, /oauth/revoke and /oauth/introspect. They read the request, count it against
its rate limit (the authorization endpoint's per client address, before any metadata document is
fetched), and hand it to identity's services in a worker thread (authlib is synchronous)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from authlib.oauth2.rfc6749 import OAuth2Error
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from auth import rate_limits
from auth.clients import NewClient, client_name, is_document_url, register_client
from auth.consent import (
    AuthorizationPageError,
    AuthorizationRequest,
    ClientRedirect,
    approve,
    check_request,
    delegable_agents,
    deny,
)
from auth.delegation import grantable_scopes
from auth.errors import ClientDocumentUnusable, RateLimited
from auth.oauth_server import (
    HttpAnswer,
    HttpRequest,
    error_answer,
    introspection_response,
    revocation_response,
    token_response,
)
from auth.scopes import SCOPE_DESCRIPTIONS
from server.kit.errors import PaywardenError
from server.vocabulary import ClientKind
from server.web.http import (
    CORS_HEADERS,
    NO_STORE,
    count,
    json_body,
    oauth_response,
    preflight,
    rate_limited_json,
    services_of,
)
from server.web.pages.common import Visit, page, sign_in_url

AUTHORIZE = "/oauth/authorize"
MAX_QUERY = 8192


# -- registration -------------------------------------------------------------------------------


def registration_document(created: NewClient) -> dict[str, Any]:
    """RFC 7591 section 3.2.1: the client's information, with its secret shown this once."""
    row = created.row
    document: dict[str, Any] = {
        "client_id": row.client_id,
        "client_id_issued_at": int(row.created_at.timestamp()),
        "client_name": row.name,
        "redirect_uris": row.redirect_uris,
        "grant_types": row.grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": row.token_endpoint_auth_method,
        "application_type": row.application_type,
        "scope": row.scope,
        "client_uri": row.client_uri,
    }
    if created.secret is not None:
        document["client_secret"] = created.secret
        document["client_secret_expires_at"] = 0
    return {key: value for key, value in document.items() if value is not None}


async def register(request: Request) -> Response:
    services = services_of(request)
    try:
        await count(request, rate_limits.registration(services.settings.rate_limit_register))
    except RateLimited as error:
        return rate_limited_json(error)
    metadata = await json_body(request)

    try:
        created = await services.db.writing(register_client, metadata=metadata, now=services.clock.now())
    except OAuth2Error as error:
        return oauth_response(error_answer(error))
    return JSONResponse(registration_document(created), status_code=201, headers={**NO_STORE, **CORS_HEADERS})


# -- token, revocation, introspection -----------------------------------------------------------


async def _form_request(request: Request) -> HttpRequest:
    form = await request.form()
    params = tuple((name, value) for name, value in form.multi_items() if isinstance(value, str))
    services = services_of(request)
    return HttpRequest(
        method="POST",
        url=f"{services.settings.public_url}{request.url.path}",
        params=params,
        authorization=request.headers.get("authorization"),
    )


Responder = Callable[..., HttpAnswer]


def _form_endpoint(respond: Responder) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        services = services_of(request)
        try:
            await count(request, rate_limits.token(services.settings.rate_limit_token))
        except RateLimited as error:
            return rate_limited_json(error)
        http = await _form_request(request)

        answer: HttpAnswer = await services.db.writing(
            respond, config=services.oauth, request=http, now=services.clock.now()
        )
        return oauth_response(answer)

    return endpoint


# -- authorization and consent ------------------------------------------------------------------


def _authorize_request(visit: Visit, query: str) -> HttpRequest:
    return HttpRequest(
        method="GET",
        url=f"{visit.services.settings.public_url}{AUTHORIZE}?{query}",
        params=tuple(parse_qsl(query, keep_blank_values=True)),
    )


async def _ensure_document(visit: Visit, http: HttpRequest) -> None:
    client_id = next((value for name, value in http.params if name == "client_id"), "")
    if is_document_url(client_id):
        await visit.services.client_documents.ensure_current(client_id)


async def _checked(visit: Visit, http: HttpRequest) -> AuthorizationRequest:
    await _ensure_document(visit, http)
    services = visit.services
    return await services.db.reading(
        check_request, config=services.oauth, request=http, now=services.clock.now()
    )


def _page_error(visit: Visit, error: PaywardenError) -> Response:
    title = "This application cannot connect"
    if isinstance(error, ClientDocumentUnusable | AuthorizationPageError):
        return visit.message(title, error.describe(), status=400)
    return visit.error_page(error)


async def consent_page(
    visit: Visit, query: str, checked: AuthorizationRequest, *, error: PaywardenError | None = None
) -> Response:
    services = visit.services
    signed_in = visit.member

    grantable = grantable_scopes(signed_in.member.role)
    requested = sorted(checked.scopes)
    context = {
        "title": f"Connect {client_name(checked.client)}",
        "client_name": client_name(checked.client),
        "client_id": checked.client.client_id,
        "described_by_document": checked.client.kind == ClientKind.METADATA_DOCUMENT,
        "redirect_host": checked.redirect_host,
        "agents": await services.db.reading(delegable_agents, signed_in),
        "scopes": [(scope, SCOPE_DESCRIPTIONS[scope]) for scope in requested if scope in grantable],
        "withheld": [(scope, SCOPE_DESCRIPTIONS[scope]) for scope in requested if scope not in grantable],
        "query": query,
        "error": error.describe() if error else None,
        "action": AUTHORIZE,
    }
    status = 200 if error is None else (403 if error.code != "no_scope_chosen" else 400)
    return visit.render("consent.html", context, status=status)


async def _over_the_limit(visit: Visit) -> Response | None:
    """Count this authorization request; the 429 page (with Retry-After) when it is one too many.
    Counted before anything else, since an authorization may fetch a client's metadata document."""
    try:
        await count(visit.request, rate_limits.authorize(visit.services.settings.rate_limit_authorize))
    except RateLimited as error:
        response = visit.error_page(error)
        response.headers["Retry-After"] = str(error.extra.get("retry_after", 60))
        return response
    return None


async def authorize(visit: Visit) -> Response:
    refused = await _over_the_limit(visit)
    if refused is not None:
        return refused
    query = visit.request.url.query
    if len(query) > MAX_QUERY:
        return visit.message("This application cannot connect", "The request is too long.", status=414)
    http = _authorize_request(visit, query)
    try:
        checked = await _checked(visit, http)
    except ClientRedirect as redirect:
        return visit.redirect(redirect.location, status=302)
    except PaywardenError as error:
        return _page_error(visit, error)
    if visit.signed_in is None:
        return visit.redirect(sign_in_url(visit.request), status=302)
    return await consent_page(visit, query, checked)


async def decide(visit: Visit) -> Response:
    refused = await _over_the_limit(visit)
    if refused is not None:
        return refused
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    query = str(form.get("query") or "")
    if len(query) > MAX_QUERY:
        return visit.message("This application cannot connect", "The request is too long.", status=414)
    http = _authorize_request(visit, query)
    services = visit.services
    signed_in = visit.member
    try:
        checked = await _checked(visit, http)
    except ClientRedirect as redirect:
        return visit.redirect(redirect.location)
    except PaywardenError as error:
        return _page_error(visit, error)
    scopes = [str(value) for value in form.getlist("scope")]
    agent_id = str(form.get("agent") or "")
    allowed = form.get("decision") == "allow"

    now = services.clock.now()
    try:
        if allowed:
            location = await services.db.writing(
                approve,
                config=services.oauth,
                request=http,
                signed_in=signed_in,
                agent_id=agent_id,
                scopes=scopes,
                now=now,
            )
        else:
            location = await services.db.writing(deny, config=services.oauth, request=http, now=now)
    except ClientRedirect as redirect:
        return visit.redirect(redirect.location)
    except PaywardenError as error:
        if isinstance(error, ClientDocumentUnusable | AuthorizationPageError):
            return _page_error(visit, error)
        return await consent_page(visit, query, checked, error=error)
    return visit.redirect(location)


def routes() -> list[BaseRoute]:
    return [
        Route("/oauth/register", endpoint=register, methods=["POST"]),
        Route("/oauth/register", endpoint=preflight, methods=["OPTIONS"]),
        Route(AUTHORIZE, endpoint=page(authorize), methods=["GET"]),
        Route(AUTHORIZE, endpoint=page(decide, signed_in=True), methods=["POST"]),
        Route("/oauth/token", endpoint=_form_endpoint(token_response), methods=["POST"]),
        Route("/oauth/token", endpoint=preflight, methods=["OPTIONS"]),
        Route("/oauth/revoke", endpoint=_form_endpoint(revocation_response), methods=["POST"]),
        Route("/oauth/revoke", endpoint=preflight, methods=["OPTIONS"]),
        Route("/oauth/introspect", endpoint=_form_endpoint(introspection_response), methods=["POST"]),
    ]
