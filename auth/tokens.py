"""Bearer tokens: random secrets shown once, stored as SHA-256, prefixed by kind.

Every token Paywarden accepts lives in `access_tokens`, whether the CLI issued it (here) or the
authorization server did (auth/token_families.py), so one verifier serves both.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from auth.principal import Principal
from auth.repository import TokenRepository
from auth.scopes import ADMIN_SCOPES, Scope
from server.audit.service import record as audit
from server.kit.errors import InputReason, InvalidInput, PaywardenError
from server.kit.ids import new_id
from server.models import AccessToken
from server.vocabulary import TokenKind

ACCESS_PREFIX = "pw_at_"
REFRESH_PREFIX = "pw_rt_"
CLIENT_SECRET_PREFIX = "pw_cs_"  # noqa: S105 - a prefix, not a secret

MIN_TTL_SECONDS = 60
MAX_TTL_SECONDS = 366 * 24 * 3600
DEFAULT_TTL_SECONDS = 30 * 24 * 3600


class TokenNotFound(PaywardenError):
    code = "token_not_found"
    message = "No token with that id."


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedToken:
    token_id: str
    token: str
    expires_at: datetime
    scopes: tuple[Scope, ...]


def issue_access_token(
    session: Session,
    *,
    org_id: str,
    agent_id: str | None,
    scopes: frozenset[Scope],
    audience: str,
    ttl_seconds: int,
    created_by: str,
    now: datetime,
    label: str | None = None,
    client_id: str | None = None,
) -> IssuedToken:
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise InvalidInput(InputReason.INVALID_TTL)
    if agent_id is not None and scopes & ADMIN_SCOPES:
        raise InvalidInput(InputReason.ADMIN_SCOPE_NOT_GRANTABLE)
    secret = new_secret(ACCESS_PREFIX)
    row = AccessToken(
        id=new_id("token"),
        org_id=org_id,
        agent_id=agent_id,
        client_id=client_id,
        kind=TokenKind.ACCESS,
        token_hash=hash_secret(secret),
        scopes=" ".join(sorted(scopes)),
        audience=audience,
        label=label,
        created_by=created_by,
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_seconds),
    )
    TokenRepository(session).add(row)
    audit(
        session,
        org_id=org_id,
        type="token.issued",
        actor=created_by,
        agent_id=agent_id,
        subject_id=row.id,
        data={"scopes": sorted(scopes), "audience": audience, "expiresAt": row.expires_at.isoformat()},
        now=now,
    )
    return IssuedToken(row.id, secret, row.expires_at, tuple(sorted(scopes)))


def revoke_token(session: Session, principal: Principal, *, token_id: str, now: datetime) -> AccessToken:
    """Revoke a token the principal may read, at once; revoking it again changes nothing."""
    tokens = TokenRepository(session)
    row = tokens.get_readable(principal, token_id)
    if row is None:
        raise TokenNotFound()
    if row.revoked_at is None:
        row.revoked_at = now
        tokens.add(row, flush=False)
        audit(
            session,
            org_id=row.org_id,
            type="token.revoked",
            actor=principal.actor,
            agent_id=row.agent_id,
            subject_id=row.id,
            data={},
            now=now,
        )
    return row


def live_tokens(
    session: Session, principal: Principal, *, org_id: str, now: datetime, agent_id: str | None = None
) -> list[AccessToken]:
    """The organisation's access tokens that still work, newest first (only an agent's with
    `agent_id`); the caller shows their ids and scopes, never a secret (only hashes are kept)."""
    return list(TokenRepository(session).live_of_org(principal, org_id=org_id, now=now, agent_id=agent_id))


def find_by_secret(session: Session, secret: str) -> AccessToken | None:
    return TokenRepository(session).by_hash(hash_secret(secret))
