"""A process that makes reservations as fast as it can, for the decisions benchmark.

Run as `python -m tests.bench.reserve_worker DATABASE_URL`; it reads one JSON command per line on
stdin: `{"agents": [...], "seconds": S, "start": ISO-8601}`. It warms up, answers `ready`, waits for a
`go` line (so every worker starts together), then calls the ledger's `reserve` (decision and
reservation in one transaction, through tests/support/ledger.py) for S seconds, each time for a
random agent of the list with a new idempotency key, and answers one JSON line: how many
reservations of each kind it made. The clock is the command's `start` plus the time elapsed, so
each cell of the benchmark can begin in a window of its own.
"""

from __future__ import annotations

import json
import random
import secrets
import sys
import time
from collections import Counter
from datetime import datetime, timedelta

from server.kit.db import Database
from tests.support.databases import TEST_AUDIT_KEY
from tests.support.ledger import facts, reserve_now

AMOUNT = 1  # one atomic unit: no cap is ever reached, so every reservation is authorised
WARM_UP = 5
POOL_SIZE = 2


def run(db: Database, agents: list[str], seconds: float, start: datetime) -> Counter[str]:
    kinds: Counter[str] = Counter()
    began = time.monotonic()
    deadline = began + seconds
    while (now_mono := time.monotonic()) < deadline:
        now = start + timedelta(seconds=now_mono - began)
        agent_id = random.choice(agents)
        reservation = reserve_now(db, agent_id, facts(secrets.token_hex(12), amount=AMOUNT), now)
        kinds[reservation.kind] += 1
    return kinds


def main() -> None:
    # The databases' own audit key (tests/support/databases.py): a reservation writes an audit event.
    db = Database(sys.argv[1], pool_size=POOL_SIZE, audit_key=TEST_AUDIT_KEY)
    for line in sys.stdin:
        command = json.loads(line)
        agents = list(command["agents"])
        start = datetime.fromisoformat(command["start"])
        warm = run_count(db, agents, WARM_UP, start - timedelta(hours=1))
        print(json.dumps({"ready": True, "warm": dict(warm)}), flush=True)
        if sys.stdin.readline().strip() != "go":
            break
        began = time.monotonic()
        kinds = run(db, agents, float(command["seconds"]), start)
        print(json.dumps({"kinds": dict(kinds), "elapsed": time.monotonic() - began}), flush=True)
    db.dispose()


def run_count(db: Database, agents: list[str], count: int, now: datetime) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for _ in range(count):
        agent_id = random.choice(agents)
        kinds[reserve_now(db, agent_id, facts(secrets.token_hex(12), amount=AMOUNT), now).kind] += 1
    return kinds


if __name__ == "__main__":
    main()
