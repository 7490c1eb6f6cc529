"""Leases: a job runs in the process that holds its row in `job_leases` until it lapses.

Taking a lease is one conditional write, so two processes can never both believe they hold it;
a process that dies simply stops renewing, and another takes over once the lease lapses.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlmodel import Session

from server.jobs.repository import LeaseRepository
from server.models import JobLease


def try_acquire(session: Session, *, name: str, holder: str, now: datetime, ttl_seconds: float) -> bool:
    expires = now + timedelta(seconds=ttl_seconds)
    leases = LeaseRepository(session)
    if leases.take_over(name=name, holder=holder, now=now, expires_at=expires):
        return True
    if leases.exists(name):
        return False
    return leases.add_unique(JobLease(name=name, holder=holder, expires_at=expires))


def release(session: Session, *, name: str, holder: str, now: datetime) -> None:
    LeaseRepository(session).lapse(name=name, holder=holder, now=now)
