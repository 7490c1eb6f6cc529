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


def revoke_connection(session: Session, signed_in: SignedIn, *, grant_id: str, now: datetime) -> OAuthGrant:
    grants = GrantRepository(session)
    grant = grants.get_readable(signed_in.principal, grant_id)
    if grant is not None:
        # Locked, so a refresh of this grant either finishes first (and its tokens are revoked
        # below) or waits and finds the grant revoked.
        grant = grants.lock(grant.org_id, grant.id)
    if grant is None or grant.revoked_at is not None:
        raise ConnectionNotFound()
    agent = DelegableAgentRepository(session).get_readable(signed_in.principal, grant.agent_id)
    if agent is None:
        raise ConnectionNotFound()
    if not may_revoke(signed_in.member, agent=agent, granted_by=grant.member_id):
        raise RevokeForbidden()
    grant.revoked_at = now
    grant.revoked_by = signed_in.principal.actor
    grants.add(grant)
    revoked = TokenRepository(session).revoke_of_grant(org_id=grant.org_id, grant_id=grant.id, now=now)
    audit(
        session,
        org_id=grant.org_id,
        type="oauth.grant_revoked",
        actor=signed_in.principal.actor,
        agent_id=grant.agent_id,
        subject_id=grant.id,
        data={"client": grant.client_id, "tokensRevoked": revoked},
        now=now,
    )
    return grant
