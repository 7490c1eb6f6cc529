"""The OAuth 2.1 authorization server, on authlib, with what OAuth 2.1 and MCP need beyond it.

authlib supplies the grants' mechanics, client authentication (`none`, `client_secret_basic`,
`client_secret_post`), error documents and the RFC 7009 and RFC 7662 endpoints. What it lacks,
or does otherwise, is here:

- PKCE with S256 only, for every client: authlib's extension defaults to `plain` and requires
  PKCE only from public clients (`S256CodeChallenge`).
- RFC 8707 resource indicators: authlib ignores `resource`. Paywarden has one resource,
  `<PUBLIC_URL>/mcp`; any other is `invalid_target`, and the resource is stored on the code and
  bound into every token's audience (a client that sends none gets that one resource).
- Codes are single-use (a conditional update decides, so two processes cannot both exchange
  one), expire after a minute, and are bound to their client, redirect URI, PKCE challenge and
  resource; a reused code revokes the tokens it was exchanged for.
- Refresh tokens rotate with reuse detection and a short grace (auth/token_families.py).
- client_credentials only for the clients an operator created, acting for their one agent.

authlib is synchronous: entry points read the request, then run these functions in a worker
thread with a session, and the unit of work commits what they wrote (even when the answer is an
OAuth error: a revoked family must stay revoked).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

from authlib.common.urls import add_params_to_uri
from authlib.consts import default_json_headers
from authlib.oauth2.rfc6749 import (
    AuthorizationServer,
    ClientMixin,
    InvalidGrantError,
    InvalidRequestError,
    InvalidScopeError,
    OAuth2Error,
    OAuth2Request,
    UnauthorizedClientError,
)
from authlib.oauth2.rfc6749.grants import AuthorizationCodeGrant, ClientCredentialsGrant, RefreshTokenGrant
from authlib.oauth2.rfc6749.requests import OAuth2Payload
from authlib.oauth2.rfc6749.util import scope_to_list
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636.challenge import CodeChallenge, compare_s256_code_challenge
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from sqlmodel import Session

from auth.clients import REQUESTABLE_SCOPES, SECRET_METHODS, admin_client_grant, check_secret, find_client
from auth.redirects import redirect_matches
from auth.repository import ClientRepository, CodeRepository, GrantRepository, TokenRepository
from auth.scopes import AGENT_SCOPES, OFFLINE_ACCESS, Scope, scope_text
from auth.token_families import (
    IssuedPair,
    RefreshRefused,
    TokenPolicy,
    actor_of,
    client_token,
    issue_pair,
    refresh,
    revoke_family,
    revoke_token,
    start_family,
    within_grant,
)
from auth.tokens import hash_secret
from server.audit.service import record as audit
from server.models import AccessToken, AuthorizationCode, Member, OAuthClient, OAuthGrant
from server.vocabulary import ClientKind, TokenKind

CODE_TTL_SECONDS = 60
SUPPORTED_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]


class InvalidTargetError(OAuth2Error):
    """RFC 8707 section 2: the requested resource is not one this server issues tokens for."""

    error = "invalid_target"


class RedirectNotRegistered(InvalidRequestError):
    """The redirect URI is not one the client registered: never redirect there (RFC 6749 4.1.2.1)."""


@dataclass(frozen=True)
class OAuthConfig:
    issuer: str
    resource: str  # the one protected resource: <PUBLIC_URL>/mcp
    tokens: TokenPolicy
    code_ttl: int = CODE_TTL_SECONDS
    # The same resource by another loopback spelling (http://127.0.0.1:PORT/mcp for a public URL
    # on localhost:PORT): accepted, and stored as the one resource.
    aliases: frozenset[str] = frozenset()

    def resource_of(self, requested: list[str]) -> str:
        """The resource a request is for: the one there is, whether named or not."""
        for value in requested:
            if value.rstrip("/") != self.resource and value.rstrip("/") not in self.aliases:
                raise InvalidTargetError(f"The only resource here is {self.resource}.")
        return self.resource


@dataclass(frozen=True)
class HttpRequest:
    """What the authorization server reads of an HTTP request: the parameters in order (query for
    the authorization endpoint, form for the others) and the Authorization header."""

    method: str
    url: str
    params: tuple[tuple[str, str], ...]
    authorization: str | None = None


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    body: dict[str, Any] | str
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def location(self) -> str | None:
        return next((value for name, value in self.headers if name.lower() == "location"), None)


@dataclass(frozen=True)
class Consent:
    """A member's decision on the consent page: this grant, with these scopes."""

    grant: OAuthGrant
    member: Member
    scopes: frozenset[Scope]


# -- authlib's view of our rows -------------------------------------------------------------


class _Payload(OAuth2Payload):
    def __init__(self, params: tuple[tuple[str, str], ...]) -> None:
        self._datalist: defaultdict[str, list[str]] = defaultdict(list)
        for name, value in params:
            self._datalist[name].append(value)
        self._data = {name: values[0] for name, values in self._datalist.items()}

    @property
    def data(self) -> dict[str, str]:
        return self._data

    @property
    def datalist(self) -> defaultdict[str, list[str]]:
        return self._datalist


class _Request(OAuth2Request):
    def __init__(self, http: HttpRequest) -> None:
        headers = {"Authorization": http.authorization} if http.authorization else {}
        super().__init__(http.method, http.url, headers=headers)
        self.payload = _Payload(http.params)
        self.resource: str | None = None

    @property
    def form(self) -> dict[str, str]:
        data: dict[str, str] = self.payload.data
        return data

    @property
    def args(self) -> dict[str, str]:
        return self.form


class _Client(ClientMixin):
    def __init__(self, row: OAuthClient) -> None:
        self.row = row

    def get_client_id(self) -> str:
        return self.row.client_id

    def get_default_redirect_uri(self) -> None:
        return None  # a redirect_uri is always required: loopback URIs carry the port in use

    def get_allowed_scope(self, scope: str | None) -> str:
        return scope or ""

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return any(redirect_matches(registered, redirect_uri) for registered in self.row.redirect_uris)

    def check_client_secret(self, client_secret: str) -> bool:
        return check_secret(self.row, client_secret)

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        if self.row.token_endpoint_auth_method == "none":  # noqa: S105 - a method name
            return method == "none"
        return method in SECRET_METHODS

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and "authorization_code" in self.row.grant_types

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.row.grant_types


class _Code:
    def __init__(self, row: AuthorizationCode) -> None:
        self.row = row

    def get_redirect_uri(self) -> str:
        return self.row.redirect_uri

    def get_scope(self) -> str:
        return self.row.scopes


class _Token:
    def __init__(self, row: AccessToken, client: OAuthClient) -> None:
        self.row = row
        self.client = client

    def check_client(self, client: _Client) -> bool:
        return self.row.client_id == client.row.id


# -- the server -------------------------------------------------------------------------------


class PaywardenAuthorizationServer(AuthorizationServer):
    """One per request: it carries the request's session and clock."""

    def __init__(self, session: Session, config: OAuthConfig, now: datetime) -> None:
        super().__init__(scopes_supported=sorted(REQUESTABLE_SCOPES))
        self.session = session
        self.config = config
        self.now = now
        self.register_grant(_AuthorizationCode, [S256CodeChallenge(required=True)])
        self.register_grant(_RefreshToken)
        self.register_grant(_ClientCredentials)
        self.register_endpoint(_Revocation)
        self.register_endpoint(_Introspection)

    def query_client(self, client_id: str) -> _Client | None:
        row = find_client(self.session, client_id) if isinstance(client_id, str) else None
        return _Client(row) if row is not None else None

    def save_token(self, token: dict[str, Any], request: OAuth2Request) -> None:
        """Tokens are stored by the grants themselves (auth/token_families.py)."""

    def create_oauth2_request(self, request: HttpRequest | OAuth2Request) -> OAuth2Request:
        return request if isinstance(request, OAuth2Request) else _Request(request)

    def handle_response(self, status: int, body: Any, headers: list[tuple[str, str]]) -> HttpAnswer:
        return HttpAnswer(status, body, tuple(headers))

    def send_signal(self, name: str, *args: Any, **kwargs: Any) -> None:
        """authlib's signals have no listener here."""

    def validate_requested_scope(self, scope: str | None) -> None:
        names = set(scope_to_list(scope) or [])
        if names - REQUESTABLE_SCOPES:
            raise InvalidScopeError(
                "A requested scope is unknown, or may not be given to an application (admin)."
            )

    def with_issuer(self, answer: HttpAnswer) -> HttpAnswer:
        """RFC 9207: every authorization response names the issuer, errors included."""
        location = answer.location
        if location is None:
            return answer
        with_iss = add_params_to_uri(location, [("iss", self.config.issuer)])
        headers = tuple(
            (name, with_iss if name.lower() == "location" else value) for name, value in answer.headers
        )
        return HttpAnswer(answer.status, answer.body, headers)


def _server(grant: Any) -> PaywardenAuthorizationServer:
    server = grant.server
    assert isinstance(server, PaywardenAuthorizationServer)
    return server


def requested_scopes(client: OAuthClient, scope: str | None) -> frozenset[Scope]:
    """The agent scopes a request asks for: what it names (less offline_access, which only asks
    for a refresh token), or, naming none, what the client registered, else every agent scope.

    A registered scope is a default, not a ceiling: a client stepping up asks for more than it
    first registered, and the person decides on the consent page anyway."""
    names = set(scope_to_list(scope) or []) - {OFFLINE_ACCESS}
    if not names:
        names = set((client.scope or "").split()) - {OFFLINE_ACCESS} or {str(item) for item in AGENT_SCOPES}
    return frozenset(Scope(name) for name in names)


class S256CodeChallenge(CodeChallenge):
    """PKCE as OAuth 2.1 wants it: required from every client, and S256 only (RFC 7636)."""

    DEFAULT_CODE_CHALLENGE_METHOD = "S256"
    SUPPORTED_CODE_CHALLENGE_METHOD: ClassVar[list[str]] = ["S256"]
    CODE_CHALLENGE_METHODS: ClassVar[dict[str, Any]] = {"S256": compare_s256_code_challenge}

    def validate_code_challenge(self, grant: Any, redirect_uri: Any) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError(
                "PKCE is required: send code_challenge with code_challenge_method=S256."
            )
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("Only code_challenge_method=S256 is supported.")
        super().validate_code_challenge(grant, redirect_uri)

    def validate_code_verifier(self, grant: Any, result: Any) -> None:
        if not grant.request.form.get("code_verifier"):
            raise InvalidRequestError("Missing code_verifier: PKCE is required.")
        super().validate_code_verifier(grant, result)

    def get_authorization_code_challenge(self, authorization_code: _Code) -> str:
        return authorization_code.row.code_challenge

    def get_authorization_code_challenge_method(self, authorization_code: _Code) -> str:
        return "S256"


class _AuthorizationCode(AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = SUPPORTED_AUTH_METHODS

    @staticmethod
    def validate_authorization_redirect_uri(request: Any, client: _Client) -> str:
        redirect_uri = request.payload.redirect_uri
        if not redirect_uri:
            raise InvalidRequestError("Missing redirect_uri.", state=request.payload.state)
        if not client.check_redirect_uri(redirect_uri):
            raise RedirectNotRegistered("The redirect_uri is not one the client registered.")
        return str(redirect_uri)

    def validate_authorization_request(self) -> str:
        redirect_uri: str = super().validate_authorization_request()
        server = _server(self)
        try:
            self.request.resource = server.config.resource_of(
                self.request.payload.datalist.get("resource", [])
            )
            self.request.scope = scope_text(requested_scopes(self.client.row, self.request.payload.scope))
        except OAuth2Error as error:
            error.redirect_uri = redirect_uri
            raise
        return redirect_uri

    def save_authorization_code(self, code: str, request: Any) -> None:
        server = _server(self)
        consent = request.user
        assert isinstance(consent, Consent)
        CodeRepository(server.session).add(
            AuthorizationCode(
                code_hash=hash_secret(code),
                client_id=request.client.row.id,
                grant_id=consent.grant.id,
                org_id=consent.grant.org_id,
                agent_id=consent.grant.agent_id,
                member_id=consent.member.id,
                redirect_uri=request.payload.redirect_uri,
                code_challenge=request.payload.data["code_challenge"],
                resource=request.resource,
                scopes=scope_text(consent.scopes),
                created_at=server.now,
                expires_at=server.now + timedelta(seconds=server.config.code_ttl),
            )
        )

    def query_authorization_code(self, code: str, client: _Client) -> _Code:
        server = _server(self)
        codes = CodeRepository(server.session)
        row = codes.by_hash(hash_secret(code)) if isinstance(code, str) else None
        if row is None:
            raise InvalidGrantError("The authorization code is not known.")
        if row.client_id != client.row.id:
            raise InvalidGrantError("The authorization code was issued to another client.")
        if not codes.claim(row.code_hash, server.now):
            if row.family_id is not None:
                revoke_family(
                    server.session,
                    org_id=row.org_id,
                    family_id=row.family_id,
                    actor=actor_of(client.row),
                    reason="oauth.code_reused",
                    now=server.now,
                )
            raise InvalidGrantError("The authorization code was already used.")
        if row.expires_at <= server.now:
            raise InvalidGrantError("The authorization code expired.")
        return _Code(row)

    def validate_token_request(self) -> None:
        super().validate_token_request()
        code: _Code = self.request.authorization_code
        requested = self.request.payload.datalist.get("resource", [])
        if requested and _server(self).config.resource_of(requested) != code.row.resource:
            raise InvalidTargetError("The code was issued for another resource.")

    def create_token_response(self) -> tuple[int, dict[str, object], list[tuple[str, str]]]:
        server = _server(self)
        client: OAuthClient = self.request.client.row
        code: AuthorizationCode = self.request.authorization_code.row
        grant = GrantRepository(server.session).lock(code.org_id, code.grant_id)
        if grant is None or grant.revoked_at is not None:
            raise InvalidGrantError("The connection this code was issued for was revoked.")
        scopes = within_grant(code.scopes, grant)
        if not scopes:
            raise InvalidGrantError("The connection no longer allows any scope of this code.")
        family_id, pair = start_family(
            server.session,
            policy=server.config.tokens,
            grant=grant,
            client=client,
            scopes=scopes,
            now=server.now,
        )
        code.family_id = family_id
        CodeRepository(server.session).add(code)
        ClientRepository(server.session).note_use(client.id, server.now)
        return 200, pair.response(), list(self.TOKEN_RESPONSE_HEADER)


class _RefreshToken(RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = SUPPORTED_AUTH_METHODS

    def validate_token_request(self) -> None:
        self.request.client = self._validate_request_client()
        if not self.request.form.get("refresh_token"):
            raise InvalidRequestError("Missing refresh_token.")
        requested = self.request.payload.datalist.get("resource", [])
        self.request.resource = _server(self).config.resource_of(requested) if requested else None

    def create_token_response(self) -> tuple[int, dict[str, object], list[tuple[str, str]]]:
        server = _server(self)
        client: OAuthClient = self.request.client.row
        try:
            pair = refresh(
                server.session,
                policy=server.config.tokens,
                client=client,
                presented=self.request.form["refresh_token"],
                requested_scope=self.request.payload.scope,
                resource=self.request.resource,
                now=server.now,
            )
        except RefreshRefused as refused:
            raise InvalidGrantError(refused.reason) from refused
        ClientRepository(server.session).note_use(client.id, server.now)
        return 200, pair.response(), list(self.TOKEN_RESPONSE_HEADER)


class _ClientCredentials(ClientCredentialsGrant):
    TOKEN_ENDPOINT_AUTH_METHODS: ClassVar[list[str]] = ["client_secret_basic", "client_secret_post"]

    def validate_token_request(self) -> None:
        client = self.authenticate_token_endpoint_client()
        if not client.check_grant_type(self.GRANT_TYPE) or client.row.kind != ClientKind.ADMIN:
            raise UnauthorizedClientError("This client may not use client_credentials.")
        self.request.client = client
        server = _server(self)
        grant = admin_client_grant(server.session, client.row)
        if grant is None:
            raise UnauthorizedClientError("This client's access was revoked.")
        allowed = set(grant.scopes.split())
        wanted = set(scope_to_list(self.request.payload.scope) or []) - {OFFLINE_ACCESS} or allowed
        if not wanted <= allowed:
            raise InvalidScopeError("The client asked for a scope it was not given.")
        self.request.scope = scope_text(wanted)
        self.request.resource = server.config.resource_of(self.request.payload.datalist.get("resource", []))
        self.request.user = grant

    def create_token_response(self) -> tuple[int, dict[str, object], list[tuple[str, str]]]:
        server = _server(self)
        client: OAuthClient = self.request.client.row
        grant: OAuthGrant = self.request.user
        pair: IssuedPair = issue_pair(
            server.session,
            policy=server.config.tokens,
            grant=grant,
            client=client,
            scopes=self.request.scope,
            family_id=None,
            with_refresh=False,
            now=server.now,
        )
        audit(
            server.session,
            org_id=grant.org_id,
            type="token.issued",
            actor=actor_of(client),
            agent_id=grant.agent_id,
            subject_id=grant.id,
            data={"grant": "client_credentials", "scopes": self.request.scope.split()},
            now=server.now,
        )
        ClientRepository(server.session).note_use(client.id, server.now)
        return 200, pair.response(), list(self.TOKEN_RESPONSE_HEADER)


class _Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = SUPPORTED_AUTH_METHODS

    def authenticate_token(self, request: _Request, client: _Client) -> _Token | None:
        self.check_params(request, client)
        server: PaywardenAuthorizationServer = self.server
        # RFC 7009 section 2.2: an unknown token, or another client's, is answered like a success.
        row = client_token(server.session, client=client.row, secret=request.form["token"])
        return _Token(row, client.row) if row is not None else None

    def revoke_token(self, token: _Token, request: _Request) -> None:
        server: PaywardenAuthorizationServer = self.server
        revoke_token(server.session, client=token.client, row=token.row, now=server.now)


class _Introspection(IntrospectionEndpoint):
    """RFC 7662, for a client's own tokens: a client learns nothing of other clients' tokens."""

    CLIENT_AUTH_METHODS = SUPPORTED_AUTH_METHODS

    def authenticate_token(self, request: _Request, client: _Client) -> _Token | None:
        self.check_params(request, client)
        server: PaywardenAuthorizationServer = self.server
        row = client_token(server.session, client=client.row, secret=request.form["token"])
        return _Token(row, client.row) if row is not None else None

    def create_introspection_payload(self, token: _Token | None) -> dict[str, Any]:
        server: PaywardenAuthorizationServer = self.server
        if token is None:
            return {"active": False}
        row = token.row
        if row.revoked_at is not None or row.rotated_at is not None or row.expires_at <= server.now:
            return {"active": False}
        if row.agent_id is None or not TokenRepository(server.session).agent_enabled(
            org_id=row.org_id, agent_id=row.agent_id
        ):
            return {"active": False}
        return {
            "active": True,
            "scope": row.scopes,
            "client_id": token.client.client_id,
            "token_type": "Bearer" if row.kind == TokenKind.ACCESS else "refresh_token",
            "exp": int(row.expires_at.timestamp()),
            "iat": int(row.created_at.timestamp()),
            "sub": row.agent_id,
            "aud": row.audience,
            "iss": server.config.issuer,
        }


# -- the endpoints, as entry points call them ----------------------------------------------


def token_response(
    session: Session, *, config: OAuthConfig, request: HttpRequest, now: datetime
) -> HttpAnswer:
    """POST /oauth/token: every grant; errors are RFC 6749 documents, never cached."""
    answer = PaywardenAuthorizationServer(session, config, now).create_token_response(request)
    assert isinstance(answer, HttpAnswer)
    return answer


def revocation_response(
    session: Session, *, config: OAuthConfig, request: HttpRequest, now: datetime
) -> HttpAnswer:
    """POST /oauth/revoke (RFC 7009)."""
    return _endpoint_response("revocation", session, config=config, request=request, now=now)


def introspection_response(
    session: Session, *, config: OAuthConfig, request: HttpRequest, now: datetime
) -> HttpAnswer:
    """POST /oauth/introspect (RFC 7662)."""
    return _endpoint_response("introspection", session, config=config, request=request, now=now)


def _endpoint_response(
    name: str, session: Session, *, config: OAuthConfig, request: HttpRequest, now: datetime
) -> HttpAnswer:
    answer = PaywardenAuthorizationServer(session, config, now).create_endpoint_response(name, request)
    assert isinstance(answer, HttpAnswer)
    return answer


def error_answer(error: OAuth2Error) -> HttpAnswer:
    """An OAuth error as a JSON answer that is never cached."""
    status, body, headers = error()
    return HttpAnswer(status, body, tuple(headers or default_json_headers))
