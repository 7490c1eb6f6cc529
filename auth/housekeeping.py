"""A background job that forgets what identity no longer needs: expired codes, sessions,
challenges, rate-limit counters, remembered client-document failures and authorization-server
tokens, and client registrations that never led to a grant. Every step is a delete of rows past
their time, so running it twice, or in two processes, changes nothing more."""

from __future__ import annotations

from datetime import timedelta

from auth.clients import purge_unused
from auth.repository import (
    ChallengeRepository,
    CodeRepository,
    DocumentFailureRepository,
    RateLimitRepository,
    SessionRepository,
    StepUpRepository,
    TokenRepository,
)
from server.kit.clock import Clock
from server.kit.db import Database

# Expired codes and tokens are kept a while, so a reused one still finds its family to revoke.
TOKEN_RETENTION = timedelta(days=7)
CODE_RETENTION = timedelta(days=1)


class IdentityHousekeeping:
    name = "identity_housekeeping"
    interval_seconds = 600.0

    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def purge(self) -> int:
        now = self._clock.now()
        with self._db.write() as session:
            return (
                CodeRepository(session).purge_expired(now - CODE_RETENTION)
                + SessionRepository(session).purge_expired(now)
                + ChallengeRepository(session).purge_expired(now)
                + StepUpRepository(session).purge_expired(now)
                + RateLimitRepository(session).purge_expired(now)
                + DocumentFailureRepository(session).purge_expired(now)
                + TokenRepository(session).purge_expired(now - TOKEN_RETENTION)
                + purge_unused(session, now=now)
            )

    async def run_once(self) -> int:
        return await self._db.run(self.purge)
