"""Resource-server side: turn a bearer token into a Principal, or say precisely why not.

One verifier for every token: those issued on the command line and those the authorization
server issued (which also name their client). Each is checked for its hash, expiry, revocation,
audience and agent.
"""

from __future__ import annotations

import re
from datetime import timedelta

from auth.principal import Principal
from auth.repository import GrantRepository, TokenRepository
from auth.scopes import Scope
from auth.tokens import ACCESS_PREFIX, hash_secret
from server.kit.clock import Clock
from server.kit.db import Database
from server.vocabulary import TokenKind

_TOKEN_SHAPE = re.compile(r"^pw_at_[A-Za-z0-9_-]{40,60}$")
# A connection's "last used" is written at most this often, not on every request.
LAST_USED_PRECISION = timedelta(seconds=60)
_KNOWN_SCOPES = frozenset(str(scope) for scope in Scope)


class InvalidToken(Exception):
    """The token cannot be used; `description` is safe to show the client."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class TokenVerifier:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def verify(self, secret: str, *, audience: str) -> Principal:
        if not secret.startswith(ACCESS_PREFIX) or not _TOKEN_SHAPE.match(secret):
            raise InvalidToken("The access token is malformed.")
        with self._db.read() as session:
            row = TokenRepository(session).by_hash_with_agent(hash_secret(secret))
            if row is None or row.kind != TokenKind.ACCESS:
                raise InvalidToken("The access token is not known.")
            if row.revoked_at is not None:
                raise InvalidToken("The access token was revoked.")
            if row.expires_at <= self._clock.now():
                raise InvalidToken("The access token expired.")
            if row.audience != audience:
                raise InvalidToken("The access token was issued for another resource.")
            if row.agent_id is not None and not row.agent_enabled:
                raise InvalidToken("The agent of this token is disabled.")
            scopes = frozenset(Scope(name) for name in row.scopes.split() if name in _KNOWN_SCOPES)
            if row.agent_id is None:
                return Principal.for_admin_token(org_id=row.org_id, token_id=row.id, scopes=scopes)
            return Principal.for_agent(
                org_id=row.org_id,
                agent_id=row.agent_id,
                token_id=row.id,
                scopes=scopes,
                client_id=row.client_id,
            )

    async def verify_async(self, secret: str, *, audience: str) -> Principal:
        return await self._db.run(self.verify, secret, audience=audience)

    def note_use(self, principal: Principal) -> None:
        """Record when the connection behind an authorization-server token was last used."""
        if principal.client_id is None or principal.token_id is None or principal.org_id is None:
            return
        now = self._clock.now()
        with self._db.write() as session:
            GrantRepository(session).touch_for_token(
                org_id=principal.org_id,
                token_id=principal.token_id,
                now=now,
                not_since=now - LAST_USED_PRECISION,
            )

    async def note_use_async(self, principal: Principal) -> None:
        await self._db.run(self.note_use, principal)
