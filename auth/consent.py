"""The authorization endpoint: check a request, and turn a member's consent into a code.

A request that names a known client and one of its redirect URIs is answered at that redirect,
errors included, always with `state` (when the client sent one) and `iss` (RFC 9207). A request
that does not (unknown client, unregistered redirect URI) cannot be answered there safely, so the
member sees a page saying what is wrong (`AuthorizationPageError`).

On consent the member picks one agent they may delegate (auth/delegation.py) and some of the
requested scopes they may grant; the client's grant for that agent is created, or updated with the
new scopes, and a code bound to all of it is issued. A consent that gives fewer scopes than the
grant held narrows every earlier sign-in of the grant too: the latest consent is the only one.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from authlib.oauth2.rfc6749 import InvalidClientError, OAuth2Error
from sqlmodel import Session

from auth.delegation import grantable_scopes, may_delegate
from auth.errors import AgentNotDelegable, NoScopeChosen, ScopeNotGrantable
from auth.oauth_server import (
    Consent,
    HttpAnswer,
    HttpRequest,
    OAuthConfig,
    PaywardenAuthorizationServer,
    RedirectNotRegistered,
)
from auth.redirects import host_of
from auth.repository import DelegableAgentRepository, GrantRepository
from auth.scopes import Scope, scope_text
from auth.sessions import SignedIn
from auth.token_families import narrow_grant
from server.audit.service import record as audit
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, OAuthClient, OAuthGrant


class PageReason(StrEnum):
    UNKNOWN_CLIENT = "unknown_client"
    REDIRECT_NOT_REGISTERED = "redirect_not_registered"
    MALFORMED = "malformed"


_PAGE_SENTENCES = {
    PageReason.UNKNOWN_CLIENT: (
        "Paywarden does not know the application that sent you here. Go back to the application and "
        "connect it again."
    ),
    PageReason.REDIRECT_NOT_REGISTERED: (
        "The application asked Paywarden to send you back to an address it never registered, so "
        "Paywarden stopped here to protect you. Nothing was shared."
    ),
    PageReason.MALFORMED: (
        "The application's request to connect is incomplete or malformed, so it cannot go ahead. "
        "Go back to the application and try again."
    ),
}


class AuthorizationPageError(PaywardenError):
    """An authorization request that cannot be answered at the client's redirect URI."""

    code = "invalid_request"
    message = "The application's request to connect cannot go ahead."

    def __init__(self, reason: PageReason, *, detail: str | None = None) -> None:
        self.reason = reason
        super().__init__(reason=str(reason), detail=detail)

    def describe(self) -> str:
        return _PAGE_SENTENCES[self.reason]


class ClientRedirect(Exception):
    """Answer the authorization request at the client's redirect URI (an error, with state and iss)."""

    def __init__(self, location: str) -> None:
        super().__init__(location)
        self.location = location


@dataclass(frozen=True)
class AuthorizationRequest:
    """A valid request, as the consent page shows it."""

    client: OAuthClient
    redirect_uri: str
    scopes: frozenset[Scope]
    resource: str

    @property
    def redirect_host(self) -> str:
        return host_of(self.redirect_uri)


def _page_error(error: OAuth2Error) -> AuthorizationPageError:
    if isinstance(error, InvalidClientError):
        return AuthorizationPageError(PageReason.UNKNOWN_CLIENT, detail=error.description)
    if isinstance(error, RedirectNotRegistered):
        return AuthorizationPageError(PageReason.REDIRECT_NOT_REGISTERED, detail=error.description)
    return AuthorizationPageError(PageReason.MALFORMED, detail=error.description)


def _location(server: PaywardenAuthorizationServer, answer: HttpAnswer) -> str:
    location = server.with_issuer(answer).location
    assert location is not None
    return location


def _validate(server: PaywardenAuthorizationServer, request: HttpRequest) -> tuple[Any, AuthorizationRequest]:
    """authlib's validated grant, and the request as the consent page shows it."""
    try:
        grant = server.get_consent_grant(request)
    except OAuth2Error as error:
        if error.redirect_uri:
            raise ClientRedirect(_location(server, server.handle_error_response(None, error))) from error
        raise _page_error(error) from error
    validated = grant.request
    checked = AuthorizationRequest(
        client=validated.client.row,
        redirect_uri=grant.redirect_uri,
        scopes=frozenset(Scope(name) for name in validated.scope.split()),
        resource=validated.resource,
    )
    return grant, checked


def check_request(
    session: Session, *, config: OAuthConfig, request: HttpRequest, now: datetime
) -> AuthorizationRequest:
    """Validate an authorization request (raises ClientRedirect or AuthorizationPageError)."""
    return _validate(PaywardenAuthorizationServer(session, config, now), request)[1]


def delegable_agents(session: Session, signed_in: SignedIn) -> list[Agent]:
    """The agents this member may let an application act for."""
    return list(DelegableAgentRepository(session).delegable(signed_in.principal, signed_in.member))


def _grant_for(
    session: Session,
    *,
    checked: AuthorizationRequest,
    agent: Agent,
    signed_in: SignedIn,
    scopes: frozenset[Scope],
    now: datetime,
) -> OAuthGrant:
    grants = GrantRepository(session)
    grant = grants.live_for(org_id=agent.org_id, client_row_id=checked.client.id, agent_id=agent.id)
    if grant is not None:
        # Locked, so no refresh of this grant runs between the new scopes and the narrowing.
        grant = grants.lock(agent.org_id, grant.id)
    created = grant is None
    previous = frozenset(grant.scopes.split()) if grant is not None else frozenset()
    if grant is None:
        grant = OAuthGrant(
            id=new_id("grant"),
            org_id=agent.org_id,
            agent_id=agent.id,
            client_id=checked.client.id,
            created_by=signed_in.principal.actor,
            created_at=now,
            scopes="",
            resource=checked.resource,
        )
    grant.member_id = signed_in.member.id
    grant.scopes = scope_text(scopes)
    grant.resource = checked.resource
    grant.redirect_uri = checked.redirect_uri
    grant.updated_at = now
    grants.add(grant)
    audit(
        session,
        org_id=agent.org_id,
        type="oauth.grant_created" if created else "oauth.grant_changed",
        actor=signed_in.principal.actor,
        agent_id=agent.id,
        subject_id=grant.id,
        data={
            "client": checked.client.id,
            "clientName": (checked.client.name or "")[:120],
            "redirectHost": checked.redirect_host[:200],
            "scopes": sorted(scopes),
        },
        now=now,
    )
    taken_away = previous - {str(scope) for scope in scopes}
    if taken_away:
        narrowed = narrow_grant(session, grant=grant, now=now)
        audit(
            session,
            org_id=agent.org_id,
            type="oauth.grant_narrowed",
            actor=signed_in.principal.actor,
            agent_id=agent.id,
            subject_id=grant.id,
            data={
                "client": checked.client.id,
                "scopesRemoved": sorted(taken_away),
                "scopes": sorted(scopes),
                "tokensNarrowed": narrowed.tokens_narrowed,
                "tokensRevoked": narrowed.tokens_revoked,
                "codesNarrowed": narrowed.codes_narrowed,
                "codesVoided": narrowed.codes_voided,
            },
            now=now,
        )
    return grant


def approve(
    session: Session,
    *,
    config: OAuthConfig,
    request: HttpRequest,
    signed_in: SignedIn,
    agent_id: str,
    scopes: list[str],
    now: datetime,
) -> str:
    """The member said yes: returns where to send the browser (the client's redirect with a code)."""
    server = PaywardenAuthorizationServer(session, config, now)
    authlib_grant, checked = _validate(server, request)
    agent = next((item for item in delegable_agents(session, signed_in) if item.id == agent_id), None)
    if agent is None or not may_delegate(signed_in.member, agent):
        raise AgentNotDelegable()
    try:
        chosen = frozenset(Scope(name) for name in scopes)
    except ValueError as exc:
        raise ScopeNotGrantable() from exc
    if not chosen:
        raise NoScopeChosen()
    if not chosen <= checked.scopes or not chosen <= grantable_scopes(signed_in.member.role):
        raise ScopeNotGrantable()
    grant = _grant_for(session, checked=checked, agent=agent, signed_in=signed_in, scopes=chosen, now=now)
    answer = server.create_authorization_response(
        authlib_grant.request, grant_user=Consent(grant, signed_in.member, chosen), grant=authlib_grant
    )
    return _location(server, answer)


def deny(session: Session, *, config: OAuthConfig, request: HttpRequest, now: datetime) -> str:
    """The member said no: the client's redirect with `access_denied`."""
    server = PaywardenAuthorizationServer(session, config, now)
    authlib_grant, _checked = _validate(server, request)
    answer = server.create_authorization_response(authlib_grant.request, grant_user=None, grant=authlib_grant)
    return _location(server, answer)
