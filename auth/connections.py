"""Connections: the clients that hold a grant for an organisation's agents, and revoking them.

Every member of the organisation sees every live connection (what may act for its agents is no
secret inside it); revoking one is for owners and admins, the member who made it, and the agent's
person (auth/delegation.py). Revoking kills the grant and every access and refresh token it led to
at once, and is audited.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from auth.clients import client_name
from auth.delegation import may_revoke
from auth.errors import ConnectionNotFound, RevokeForbidden
from auth.principal import Principal
from auth.redirects import host_of
from auth.repository import DelegableAgentRepository, GrantRepository, TokenRepository
from auth.sessions import SignedIn
from server.audit.service import record as audit
from server.models import Agent, OAuthClient, OAuthGrant
from server.vocabulary import ClientKind


@dataclass(frozen=True)
class Connection:
    grant: OAuthGrant
    client: OAuthClient
    agent: Agent
    may_revoke: bool

    @property
    def client_name(self) -> str:
        return client_name(self.client)

    @property
    def redirect_host(self) -> str | None:
        return host_of(self.grant.redirect_uri) if self.grant.redirect_uri else None

    @property
    def how(self) -> str:
        """How the client came to be known, in words."""
        return {
            ClientKind.REGISTERED: "registered itself",
            ClientKind.METADATA_DOCUMENT: "identified by its metadata document",
            ClientKind.ADMIN: "created by an operator (client credentials)",
        }[self.client.kind]


def connections(session: Session, signed_in: SignedIn) -> list[Connection]:
    found = GrantRepository(session).live_of_org(signed_in.principal)
    return [
        Connection(
            grant, client, agent, may_revoke(signed_in.member, agent=agent, granted_by=grant.member_id)
        )
        for grant, client, agent in found
    ]


def connections_of_org(session: Session, principal: Principal) -> list[Connection]:
    """Every live connection of the principal's organisation, as an admin token sees them: an
    admin:write token may revoke each (`may_revoke` is true)."""
    found = GrantRepository(session).live_of_org(principal)
    return [Connection(grant, client, agent, True) for grant, client, agent in found]


def _live_grant(session: Session, principal: Principal, grant_id: str) -> OAuthGrant:
    grants = GrantRepository(session)
    grant = grants.get_readable(principal, grant_id)
    if grant is not None:
        # Locked, so a refresh of this grant either finishes first (and its tokens are revoked
        # below) or waits and finds the grant revoked.
        grant = grants.lock(grant.org_id, grant.id)
    if grant is None or grant.revoked_at is not None:
        raise ConnectionNotFound()
    return grant


def _end(session: Session, principal: Principal, grant: OAuthGrant, *, now: datetime) -> OAuthGrant:
    grant.revoked_at = now
    grant.revoked_by = principal.actor
    GrantRepository(session).add(grant)
    revoked = TokenRepository(session).revoke_of_grant(org_id=grant.org_id, grant_id=grant.id, now=now)
    audit(
        session,
        org_id=grant.org_id,
        type="oauth.grant_revoked",
        actor=principal.actor,
        agent_id=grant.agent_id,
        subject_id=grant.id,
        data={"client": grant.client_id, "tokensRevoked": revoked},
        now=now,
    )
    return grant


def revoke_connection(session: Session, signed_in: SignedIn, *, grant_id: str, now: datetime) -> OAuthGrant:
    grant = _live_grant(session, signed_in.principal, grant_id)
    agent = DelegableAgentRepository(session).get_readable(signed_in.principal, grant.agent_id)
    if agent is None:
        raise ConnectionNotFound()
    if not may_revoke(signed_in.member, agent=agent, granted_by=grant.member_id):
        raise RevokeForbidden()
    return _end(session, signed_in.principal, grant, now=now)


def revoke_grant(session: Session, principal: Principal, *, grant_id: str, now: datetime) -> OAuthGrant:
    """Revoke a connection of the principal's organisation (an admin token's), and every token it
    led to, at once."""
    return _end(session, principal, _live_grant(session, principal, grant_id), now=now)
