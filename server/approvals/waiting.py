"""Wait, for a bounded time, for a person to decide a pending approval.

The decision can be made by any process (the approval page behind another server process, the
command line), so the only place to learn it is the database: it is read every `interval_s`
seconds (PAYWARDEN_APPROVAL_POLL_MS) until the approval leaves `pending` or the time is up.
Waiting sleeps with anyio, so the event loop stays free, and it ends as soon as the caller is
cancelled (a client that went away).
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
from sqlmodel import Session

from auth.principal import Principal
from server.approvals import service
from server.kit.clock import Clock
from server.kit.db import Database
from server.vocabulary import ApprovalStatus


def _status_now(session: Session, principal: Principal, approval_id: str, clock: Clock) -> ApprovalStatus:
    return service.effective_status(service.get(session, principal, approval_id), clock.now())


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
    deadline = monotonic() + max(timeout_s, 0.0)
    while True:
        current = await db.reading(_status_now, principal, approval_id, clock)
        left = deadline - monotonic()
        if current != ApprovalStatus.PENDING or left <= 0:
            return current
        await anyio.sleep(min(interval_s, left))
