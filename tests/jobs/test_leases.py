"""Leases end with the process that held them: a server that shuts down releases its jobs' leases,
so the next one (another process, or the same deployment restarted) runs them at once instead of
waiting for the leases to lapse."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlmodel import select

from server.jobs.runner import JobRunner
from server.kit.clock import Clock, SystemClock, as_utc
from server.kit.db import Database
from server.kit.migrations import upgrade
from server.models import JobLease
from server.services import build_services
from tests.support.chain import free_port
from tests.support.clocks import frozen_clock, written
from tests.support.paywarden import RunningServer, settings_for
from tests.support.processes import serve_processes

pytestmark = pytest.mark.anyio

JOBS_ON = {"PAYWARDEN_BACKGROUND_JOBS": "1"}
TAKEN_TIMEOUT_S = 30.0  # far below the shortest lease's time to live (3 x 15 s)


def leases(db: Database) -> list[JobLease]:
    with db.read() as session:
        return list(session.exec(select(JobLease).order_by(JobLease.name)))


def wait_for_leases(db: Database, clock: Clock, *, count: int, not_held_by: set[str]) -> list[JobLease]:
    """Poll (bounded) until `count` leases are held by a holder not in `not_held_by`. Held means
    unexpired by the clock the server was given: its leases are stamped with that clock's time."""
    deadline = time.monotonic() + TAKEN_TIMEOUT_S
    while True:
        rows = leases(db)
        now = clock.now()
        held = [row for row in rows if row.holder not in not_held_by and as_utc(row.expires_at) > now]
        if len(held) == count:
            return rows
        if time.monotonic() > deadline:
            raise AssertionError(f"leases not taken within {TAKEN_TIMEOUT_S} s: {rows}")
        time.sleep(0.05)  # bounded polling of the database, not a wait for time to pass


async def test_the_app_releases_its_leases_when_it_shuts_down(db: Database) -> None:
    clock = frozen_clock(written(2026, 12, 1, 12, 0))
    settings = settings_for(database_url=db.url, port=8402, extra=JOBS_ON)
    jobs = build_services(settings, clock=clock, db=db).jobs
    with RunningServer(settings, port=free_port(), clock=clock):
        taken = wait_for_leases(db, clock, count=len(jobs), not_held_by=set())
    holder = taken[0].holder
    after = leases(db)
    assert {row.holder for row in after} == {holder}
    # Released: ended at the moment of shutdown, not left to run out its time to live.
    assert all(as_utc(row.expires_at) <= clock.now() for row in after)
    # Another process takes every job over at that same instant.
    successor = JobRunner(db=db, clock=clock, jobs=jobs, holder="successor")
    for job in jobs:
        assert await successor.run_due(job) is not None


def test_a_restarted_serve_process_takes_its_jobs_over_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'paywarden.db'}"
    db = Database(url)
    try:
        upgrade(db)
        count = len(build_services(settings_for(database_url=url, port=8402)).jobs)
        # `paywarden serve` keeps the machine's time, and so does this test.
        wall = SystemClock()
        with serve_processes(1, database_url=url, extra=JOBS_ON, workdir=tmp_path):
            first = wait_for_leases(db, wall, count=count, not_held_by=set())
        stopped = wall.now()
        holders = {row.holder for row in first}
        assert len(holders) == 1
        assert all(as_utc(row.expires_at) <= stopped for row in leases(db))
        with serve_processes(1, database_url=url, extra=JOBS_ON, workdir=tmp_path):
            second = wait_for_leases(db, wall, count=count, not_held_by=holders)
        assert {row.holder for row in second}.isdisjoint(holders)
    finally:
        db.dispose()
