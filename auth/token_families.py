"""Tokens the authorization server issues: access tokens, refresh tokens and their families.

An authorization code is exchanged for an access token and a refresh token that start a family.
Every refresh rotates: the refresh token is used up and a new pair of the same family is issued.

- Reuse: a refresh token presented again after it was used means a copy leaked (or a client lost
  track). The whole family is revoked, access tokens included, and the event is audited.
- Grace: several processes of one client often refresh with the same token at the same moment. For
  `grace_seconds` after a rotation, the same refresh token from the same client gets the same new
  pair again instead of a reuse verdict, so nobody is signed out. The new pair is not stored
  anywhere in clear: its secrets are an HMAC of the presented refresh token under a key derived
  from the master key, so whichever process answers the second request computes the same pair,
  and only a holder of the old refresh token can.

- Narrowing: a grant's scopes are the ceiling of every token it led to. A refresh issues the
  family's scopes that the grant still holds, and a consent that takes a scope away narrows every
  live token and unused code of the grant at once (`narrow_grant`). Both run with the grant's row
  locked, so a refresh racing a narrower consent is either narrowed afterwards or sees the
  narrower grant.

Access tokens are short-lived and bound to their resource (the audience, `<PUBLIC_URL>/mcp`), their
agent, their scopes and their client.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from sqlmodel import Session

from auth.repository import CodeRepository, GrantRepository, TokenRepository
from auth.scopes import scope_text
from auth.tokens import ACCESS_PREFIX, REFRESH_PREFIX, hash_secret, new_secret
from server.audit.service import record as audit
from server.kit.ids import new_id
from server.models import AccessToken, AuthorizationCode, OAuthClient, OAuthGrant
from server.vocabulary import TokenKind

Scoped = TypeVar("Scoped", AccessToken, AuthorizationCode)  # a row that carries granted scopes


@dataclass(frozen=True)
class TokenPolicy:
    access_ttl: int
    refresh_ttl: int
    grace_seconds: int
    successor_key: bytes


@dataclass(frozen=True)
class IssuedPair:
    access_token: str
    expires_in: int
    scopes: str
    refresh_token: str | None = None

    def response(self) -> dict[str, object]:
        body: dict[str, object] = {
            "access_token": self.access_token,
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "scope": self.scopes,
        }
        if self.refresh_token is not None:
            body["refresh_token"] = self.refresh_token
        return body


class RefreshRefused(Exception):
    """The refresh token cannot be used; `reason` is what the client is told."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def actor_of(client: OAuthClient) -> str:
    return f"client:{client.id}"


def within_grant(scopes: str, grant: OAuthGrant) -> str:
    """The scopes of `scopes` that `grant` still holds: a token never outgrows its grant."""
    return scope_text(set(scopes.split()) & set(grant.scopes.split()))


@dataclass(frozen=True)
class Narrowed:
    tokens_narrowed: int
    tokens_revoked: int
    codes_narrowed: int
    codes_voided: int


def narrow_grant(session: Session, *, grant: OAuthGrant, now: datetime) -> Narrowed:
    """Bring every live token and unused code of `grant` within its (new, narrower) scopes. A
    token left with no scope is revoked; a code left with none can no longer be exchanged. The
    caller holds the grant's row lock (`GrantRepository.lock`)."""
    tokens = TokenRepository(session)
    codes = CodeRepository(session)

    def revoke(token: AccessToken) -> None:
        token.revoked_at = now

    def void(code: AuthorizationCode) -> None:
        code.used_at = now

    narrowed, revoked = _narrow(tokens.live_of_grant(grant.org_id, grant.id), grant, ended=revoke)
    codes_narrowed, voided = _narrow(codes.unused_of_grant(grant.org_id, grant.id, now), grant, ended=void)
    session.flush()
    return Narrowed(narrowed, revoked, codes_narrowed, voided)


def _narrow(rows: Sequence[Scoped], grant: OAuthGrant, *, ended: Callable[[Scoped], None]) -> tuple[int, int]:
    """Cut each row's scopes down to the grant's, `ended` for a row left with none: how many were
    narrowed and how many ended. The rows were read in the session, which writes the changes."""
    narrowed = ended_count = 0
    for row in rows:
        kept = within_grant(row.scopes, grant)
        if kept == row.scopes:
            continue
        if kept:
            row.scopes = kept
            narrowed += 1
        else:
            ended(row)
            ended_count += 1
    return narrowed, ended_count


def _token(
    *,
    kind: TokenKind,
    secret: str,
    grant: OAuthGrant,
    client: OAuthClient,
    family_id: str | None,
    scopes: str,
    now: datetime,
    ttl: int,
) -> AccessToken:
    return AccessToken(
        id=new_id("token"),
        org_id=grant.org_id,
        agent_id=grant.agent_id,
        client_id=client.id,
        grant_id=grant.id,
        family_id=family_id,
        kind=kind,
        token_hash=hash_secret(secret),
        scopes=scopes,
        audience=grant.resource,
        created_by=actor_of(client),
        created_at=now,
        expires_at=now + timedelta(seconds=ttl),
    )


def _successors(policy: TokenPolicy, presented: str) -> tuple[str, str]:
    def derive(label: bytes) -> str:
        digest = hmac.new(policy.successor_key, label + presented.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).decode().rstrip("=")

    return ACCESS_PREFIX + derive(b"access:"), REFRESH_PREFIX + derive(b"refresh:")


def issue_pair(
    session: Session,
    *,
    policy: TokenPolicy,
    grant: OAuthGrant,
    client: OAuthClient,
    scopes: str,
    family_id: str | None,
    with_refresh: bool,
    now: datetime,
    secrets: tuple[str, str] | None = None,
) -> IssuedPair:
    """Store an access token (and a refresh token) for `grant`; the secrets are returned once."""
    access, refresh = secrets or (new_secret(ACCESS_PREFIX), new_secret(REFRESH_PREFIX))
    tokens = TokenRepository(session)
    tokens.add(
        _token(
            kind=TokenKind.ACCESS,
            secret=access,
            grant=grant,
            client=client,
            family_id=family_id,
            scopes=scopes,
            now=now,
            ttl=policy.access_ttl,
        )
    )
    if with_refresh:
        tokens.add(
            _token(
                kind=TokenKind.REFRESH,
                secret=refresh,
                grant=grant,
                client=client,
                family_id=family_id,
                scopes=scopes,
                now=now,
                ttl=policy.refresh_ttl,
            )
        )
    grant.last_used_at = now
    GrantRepository(session).add(grant, flush=False)
    return IssuedPair(access, policy.access_ttl, scopes, refresh if with_refresh else None)


def start_family(
    session: Session,
    *,
    policy: TokenPolicy,
    grant: OAuthGrant,
    client: OAuthClient,
    scopes: str,
    now: datetime,
) -> tuple[str, IssuedPair]:
    """The first pair of a new family, for an authorization code; returns (family id, pair)."""
    family_id = new_id("family")
    pair = issue_pair(
        session,
        policy=policy,
        grant=grant,
        client=client,
        scopes=scopes,
        family_id=family_id,
        with_refresh="refresh_token" in client.grant_types,
        now=now,
    )
    audit(
        session,
        org_id=grant.org_id,
        type="token.issued",
        actor=actor_of(client),
        agent_id=grant.agent_id,
        subject_id=grant.id,
        data={"grant": "authorization_code", "familyId": family_id, "scopes": scopes.split()},
        now=now,
    )
    return family_id, pair


def revoke_family(
    session: Session, *, org_id: str, family_id: str, actor: str, reason: str, now: datetime
) -> int:
    """Revoke every live token of a family, and record why."""
    tokens = TokenRepository(session)
    revoked = tokens.revoke_family(org_id=org_id, family_id=family_id, now=now)
    sample = tokens.one_of_family(org_id=org_id, family_id=family_id)
    if sample is not None:
        audit(
            session,
            org_id=sample.org_id,
            type=reason,
            actor=actor,
            agent_id=sample.agent_id,
            subject_id=sample.grant_id,
            data={"familyId": family_id, "tokensRevoked": revoked},
            now=now,
        )
    return revoked


def refresh(
    session: Session,
    *,
    policy: TokenPolicy,
    client: OAuthClient,
    presented: str,
    requested_scope: str | None,
    resource: str | None,
    now: datetime,
) -> IssuedPair:
    """Rotate a refresh token (see the module docstring for reuse and grace)."""
    tokens = TokenRepository(session)
    row = tokens.by_hash(hash_secret(presented)) if presented.startswith(REFRESH_PREFIX) else None
    if row is None or row.kind != TokenKind.REFRESH or row.grant_id is None or row.family_id is None:
        raise RefreshRefused("The refresh token is not known.")
    if row.client_id != client.id:
        raise RefreshRefused("The refresh token was issued to another client.")
    # Lock the grant before judging the token: a narrower consent or a revocation that got there
    # first has changed both, and one that comes later waits until these tokens are stored.
    grant = GrantRepository(session).lock(row.org_id, row.grant_id)
    tokens.refresh(row)
    if row.revoked_at is not None:
        raise RefreshRefused("The refresh token was revoked.")
    if row.expires_at <= now:
        raise RefreshRefused("The refresh token expired.")
    if resource is not None and resource != row.audience:
        raise RefreshRefused("The refresh token was issued for another resource.")
    if (
        grant is None
        or grant.revoked_at is not None
        or not tokens.agent_enabled(org_id=grant.org_id, agent_id=grant.agent_id)
    ):
        raise RefreshRefused("The connection behind this refresh token was revoked.")
    scopes = within_grant(row.scopes, grant)
    if not scopes:
        raise RefreshRefused("The connection no longer allows any scope of this sign-in; authorize again.")
    if requested_scope:
        wanted = set(requested_scope.split())
        if not wanted <= set(scopes.split()):
            raise RefreshRefused("A refresh cannot widen the scope; authorize again.")
        scopes = scope_text(wanted)
    successors = _successors(policy, presented)
    if tokens.claim_rotation(org_id=row.org_id, token_id=row.id, now=now):
        pair = issue_pair(
            session,
            policy=policy,
            grant=grant,
            client=client,
            scopes=scopes,
            family_id=row.family_id,
            with_refresh=True,
            now=now,
            secrets=successors,
        )
        audit(
            session,
            org_id=grant.org_id,
            type="token.refreshed",
            actor=actor_of(client),
            agent_id=grant.agent_id,
            subject_id=grant.id,
            data={"familyId": row.family_id, "scopes": scopes.split()},
            now=now,
        )
        return pair
    # Another request rotated this token first: the same client within the grace gets the same
    # pair; anything else is reuse.
    tokens.refresh(row)
    rotated_at = row.rotated_at
    within_grace = rotated_at is not None and now - rotated_at <= timedelta(seconds=policy.grace_seconds)
    access = tokens.by_hash(hash_secret(successors[0]))
    refresh_row = tokens.by_hash(hash_secret(successors[1]))
    if (
        within_grace
        and row.revoked_at is None
        and access is not None
        and refresh_row is not None
        and access.revoked_at is None
        and refresh_row.revoked_at is None
        and access.scopes == scopes
    ):
        remaining = max(int((access.expires_at - now).total_seconds()), 1)
        return IssuedPair(successors[0], remaining, access.scopes, successors[1])
    revoke_family(
        session,
        org_id=row.org_id,
        family_id=row.family_id,
        actor=actor_of(client),
        reason="oauth.refresh_reused",
        now=now,
    )
    raise RefreshRefused("The refresh token was already used; every token of this sign-in was revoked.")


def client_token(session: Session, *, client: OAuthClient, secret: str) -> AccessToken | None:
    """A token issued to `client`, found by its secret (for revocation and introspection)."""
    row = TokenRepository(session).by_hash(hash_secret(secret))
    return row if row is not None and row.client_id == client.id else None


def revoke_token(session: Session, *, client: OAuthClient, row: AccessToken, now: datetime) -> None:
    """RFC 7009: revoking a refresh token revokes its whole family; an access token, itself."""
    if row.kind == TokenKind.REFRESH and row.family_id is not None:
        revoke_family(
            session,
            org_id=row.org_id,
            family_id=row.family_id,
            actor=actor_of(client),
            reason="token.revoked",
            now=now,
        )
        return
    if row.revoked_at is None:
        row.revoked_at = now
        TokenRepository(session).add(row)
        audit(
            session,
            org_id=row.org_id,
            type="token.revoked",
            actor=actor_of(client),
            agent_id=row.agent_id,
            subject_id=row.id,
            data={"kind": str(row.kind)},
            now=now,
        )
