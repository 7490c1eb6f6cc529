"""Wait, for a bounded time, for a person to decide a pending approval or policy change request.

The decision can be made by any process (the approval page behind another server process, the
command line), so the only place to learn it is the database: it is read every `interval_s`
seconds (PAYWARDEN_APPROVAL_POLL_MS) until it is no longer pending or the time is up. Waiting
sleeps with anyio, so the event loop stays free, and it ends as soon as the caller is cancelled (a
client that went away).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

import anyio
from sqlmodel import Session

from auth.principal import Principal
from server.approvals import policy_changes, service
from server.kit.clock import Clock
from server.kit.db import Database
from server.vocabulary import ApprovalStatus, PolicyChangeStatus

S = TypeVar("S", bound=StrEnum)


def _status_now(session: Session, principal: Principal, approval_id: str, clock: Clock) -> ApprovalStatus:
    return service.effective_status(service.get(session, principal, approval_id), clock.now())


def _change_status_now(
    session: Session, principal: Principal, request_id: str, clock: Clock
) -> PolicyChangeStatus:
    return policy_changes.request_status(session, principal, request_id, now=clock.now()).status


async def _until_decided(
    read: Callable[[], Awaitable[S]],
    pending: S,
    *,
    timeout_s: float,
    interval_s: float,
    monotonic: Callable[[], float],
) -> S:
    deadline = monotonic() + max(timeout_s, 0.0)
    while True:
        current = await read()
        left = deadline - monotonic()
        if current != pending or left <= 0:
            return current
        await anyio.sleep(min(interval_s, left))


async def wait_for_decision(
    db: Database,
    principal: Principal,
    approval_id: str,
    *,
    clock: Clock,
    timeout_s: float,
    interval_s: float,
    monotonic: Callable[[], float] = anyio.current_time,
) -> ApprovalStatus:
    """The approval's status once it is no longer pending, or `pending` when `timeout_s` ran out.

    Its expiry counts as a decision (`expired`), as computed on every read."""

    async def read() -> ApprovalStatus:
        return await db.reading(_status_now, principal, approval_id, clock)

    return await _until_decided(
        read, ApprovalStatus.PENDING, timeout_s=timeout_s, interval_s=interval_s, monotonic=monotonic
    )


async def wait_for_change_decision(
    db: Database,
    principal: Principal,
    request_id: str,
    *,
    clock: Clock,
    timeout_s: float,
    interval_s: float,
    monotonic: Callable[[], float] = anyio.current_time,
) -> PolicyChangeStatus:
    """The policy change request's status once it is no longer pending (approved, rejected or
    expired), or `pending` when `timeout_s` ran out."""

    async def read() -> PolicyChangeStatus:
        return await db.reading(_change_status_now, principal, request_id, clock)

    return await _until_decided(
        read, PolicyChangeStatus.PENDING, timeout_s=timeout_s, interval_s=interval_s, monotonic=monotonic
    )
