"""Run every background job on its interval, in whichever process holds the job's lease.

A job is an object with a `name`, an `interval_seconds` and `async run_once() -> int` (items
handled). Passes must be idempotent: a lease can lapse mid-pass, and work is always re-checked
against the database, never against memory.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from typing import Protocol

import anyio
from sqlmodel import Session

from server.jobs.lease import release, try_acquire
from server.kit.clock import Clock
from server.kit.db import Database

log = logging.getLogger("paywarden.jobs")


class Job(Protocol):
    name: str
    interval_seconds: float

    async def run_once(self) -> int: ...


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class JobRunner:
    def __init__(self, *, db: Database, clock: Clock, jobs: Sequence[Job], holder: str | None = None) -> None:
        self._db = db
        self._clock = clock
        self._jobs = list(jobs)
        self.holder = holder or holder_id()

    def _acquire(self, session: Session, job: Job) -> bool:
        return try_acquire(
            session,
            name=job.name,
            holder=self.holder,
            now=self._clock.now(),
            ttl_seconds=job.interval_seconds * 3,
        )

    async def run_due(self, job: Job) -> int | None:
        """One pass of `job` if this process holds (or takes) its lease; None if another does."""
        if not await self._db.writing(self._acquire, job):
            return None
        return await job.run_once()

    async def _loop(self, job: Job) -> None:
        while True:
            try:
                await self.run_due(job)
            except Exception:
                # A failing pass must not stop the others; it is retried on the next interval.
                log.exception("background job %s failed", job.name)
            await anyio.sleep(job.interval_seconds)

    async def run_forever(self) -> None:
        async with anyio.create_task_group() as group:
            for job in self._jobs:
                group.start_soon(self._loop, job)

    def _release_all(self, session: Session) -> None:
        now = self._clock.now()
        for job in self._jobs:
            release(session, name=job.name, holder=self.holder, now=now)

    async def release(self) -> None:
        """End every lease this process holds, so another process (or this one restarted) takes
        the jobs over at once instead of waiting for the leases to lapse. Runs even while the
        caller is being cancelled: it is what a shutdown does last."""
        with anyio.CancelScope(shield=True):
            try:
                await self._db.writing(self._release_all)
            except Exception:
                # The leases then lapse on their own after their time to live.
                log.exception("could not release the background jobs' leases")
