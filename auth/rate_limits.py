"""Abuse limits on sign-in, client registration, the authorization endpoint and the token
endpoints, counted in the database so that every server process behind a load balancer counts
against the same limit.

Each limit is a fixed window: at most `max_requests` per `window_seconds` for one key (the limit's
name and who is asking: a client address, or a client id). Counting is one atomic statement, so two
processes counting at once never lose a request.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from auth.errors import RateLimited
from auth.repository import RateLimitRepository

_MAX_KEY = 200


@dataclass(frozen=True)
class Limit:
    name: str
    max_requests: int
    window_seconds: int


def sign_in(max_per_minute: int) -> Limit:
    return Limit("sign_in", max_per_minute, 60)


def registration(max_per_hour: int) -> Limit:
    return Limit("register", max_per_hour, 3600)


def token(max_per_minute: int) -> Limit:
    return Limit("token", max_per_minute, 60)


def authorize(max_per_minute: int) -> Limit:
    return Limit("authorize", max_per_minute, 60)


def admin_api(max_per_minute: int) -> Limit:
    return Limit("admin_api", max_per_minute, 60)


def _key(limit: Limit, who: str) -> str:
    key = f"{limit.name}:{who}"
    if len(key) > _MAX_KEY:
        key = f"{limit.name}:sha256:{hashlib.sha256(who.encode()).hexdigest()}"
    return key


def count_request(session: Session, *, limit: Limit, who: str, now: datetime) -> None:
    """Count this request; raise RateLimited (with `retry_after`, seconds) when it is one too many."""
    epoch = math.floor(now.timestamp())
    window_start = epoch - epoch % limit.window_seconds
    window_end = window_start + limit.window_seconds
    count = RateLimitRepository(session).count(
        key=_key(limit, who),
        window_start=window_start,
        expires_at=now + timedelta(seconds=window_end - epoch),
    )
    if count > limit.max_requests:
        raise RateLimited(retry_after=max(window_end - epoch, 1))
