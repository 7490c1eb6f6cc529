"""Bearer tokens: random secrets shown once, stored as SHA-256, prefixed by kind.

Every token Paywarden accepts lives in `access_tokens`, whether the CLI issued it (here) or the
authorization server did (auth/token_families.py), so one verifier serves both.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
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


class TokenAlreadyIssued(PaywardenError):
    code = "token_already_issued"
    message = "This token was already issued and shown once: it is not shown again."


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
    derive_secret: Callable[[str], str] | None = None,
    token_id: str | None = None,
) -> IssuedToken:
    """A new access token. `derive_secret` (token id -> secret) is for a token that must be shown
    again later by whoever can derive it (the demo's); every other secret is random, shown once.
    `token_id` names the token before it exists (a form's one-time nonce does): issuing under an
    id already taken issues nothing and raises TokenAlreadyIssued, even when two requests race."""
    if not MIN_TTL_SECONDS <= ttl_seconds <= MAX_TTL_SECONDS:
        raise InvalidInput(InputReason.INVALID_TTL)
    if agent_id is not None and scopes & ADMIN_SCOPES:
        raise InvalidInput(InputReason.ADMIN_SCOPE_NOT_GRANTABLE)
    named = token_id is not None
    token_id = token_id or new_id("token")
    secret = new_secret(ACCESS_PREFIX) if derive_secret is None else derive_secret(token_id)
    row = AccessToken(
        id=token_id,
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
    repository = TokenRepository(session)
    if not named:
        repository.add(row)
    elif not repository.add_unique(row):
        raise TokenAlreadyIssued()
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


def reusable_token(
    session: Session,
    *,
    org_id: str,
    agent_id: str,
    label: str,
    audience: str,
    derive_secret: Callable[[str], str],
    live_until: datetime,
) -> IssuedToken | None:
    """The newest token `issue_access_token(derive_secret=...)` made with this label, if it is still
    valid at `live_until` and its secret still derives the same way (another master key would not)."""
    row = TokenRepository(session).newest_labelled(
        org_id=org_id, agent_id=agent_id, label=label, audience=audience, live_until=live_until
    )
    if row is None:
        return None
    secret = derive_secret(row.id)
    if not hmac.compare_digest(hash_secret(secret), row.token_hash):
        return None
    return IssuedToken(row.id, secret, row.expires_at, tuple(sorted(Scope(s) for s in row.scopes.split())))


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


@dataclass(frozen=True)
class LiveToken:
    row: AccessToken
    last_used_at: datetime | None  # known for tokens of a connection (OAuth), else None


def live_tokens(
    session: Session,
    principal: Principal,
    *,
    org_id: str | None,
    now: datetime,
    agent_id: str | None = None,
) -> list[LiveToken]:
    """Access tokens that still work, newest first (of one organisation, or every one the
    principal reads with `org_id` None; only an agent's with `agent_id`). The caller shows ids,
    scopes and times, never a secret: only hashes are kept."""
    found = TokenRepository(session).live_of_org(principal, org_id=org_id, now=now, agent_id=agent_id)
    return [LiveToken(row, last_used) for row, last_used in found]


def find_by_secret(session: Session, secret: str) -> AccessToken | None:
    return TokenRepository(session).by_hash(hash_secret(secret))
