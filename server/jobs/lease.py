"""Leases: a job runs in the process that holds its row in `job_leases` until it lapses.

Taking a lease is one conditional write, so two processes can never both believe they hold it;
a process that dies simply stops renewing, and another takes over once the lease lapses.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from server.models import JobLease


def try_acquire(session: Session, *, name: str, holder: str, now: datetime, ttl_seconds: float) -> bool:
    expires = now + timedelta(seconds=ttl_seconds)
    result = session.execute(
        update(JobLease)
        .where(col(JobLease.name) == name)
        .where(or_(col(JobLease.holder) == holder, col(JobLease.expires_at) <= now))
        .values(holder=holder, expires_at=expires)
    )
    if result.rowcount == 1:  # type: ignore[attr-defined]
        return True
    if session.get(JobLease, name) is not None:
        return False
    try:
        with session.begin_nested():
            session.add(JobLease(name=name, holder=holder, expires_at=expires))
    except IntegrityError:
        return False
    return True


def release(session: Session, *, name: str, holder: str, now: datetime) -> None:
    session.execute(
        update(JobLease)
        .where(col(JobLease.name) == name, col(JobLease.holder) == holder)
        .values(expires_at=now)
    )
