"""Many payment rows at once, written with SQL for speed: COPY on PostgreSQL, executemany on SQLite.

For benchmarks and query-plan tests that need a big ledger. The rows are what the ledger itself
writes for finished payments (mostly settled, some failed and expired, long past their
`validBefore`), spread evenly over the last `days` days up to `now`, for agents that already exist
(created through the services). Returns what the rows add up to, so a test can check that the
server counts them.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from server.kit.clock import utc_day_start
from server.kit.db import Database

COLUMNS = (
    "id",
    "org_id",
    "agent_id",
    "idempotency_key",
    "fingerprint",
    "status",
    "origin",
    "method",
    "host",
    "resource",
    "path",
    "x402_version",
    "network",
    "asset",
    "pay_to",
    "amount_atomic",
    "payer",
    "nonce",
    "valid_after",
    "valid_before",
    "policy_version",
    "decision",
    "wallet_mode",
    "seller_status",
    "tx_hash",
    "failure_code",
    "created_at",
    "authorized_at",
    "submitted_at",
    "completed_at",
    "settled_at",
    "updated_at",
    "lapse_block",
    "lapse_block_time",
)
# Out of 100 payments: how many end in each state.
STATUS_MIX = (("settled", 95), ("failed", 3), ("expired", 2))
COUNTED_FOR_EVER = {"settled"}
# A failed or expired payment counts until the chain shows its window closed; the reconciler then
# records the block that proves it (`lapse_block`). Rows written here get that record once their
# window is over at `now`, as the reconciler would have given them.
LAPSE_BLOCK = 1
HOST = "api.example.com"
ASSET = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAY_TO = "0x1111111111111111111111111111111111111111"
VALIDITY_S = 300
SQLITE_TIME = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy keeps a DateTime in SQLite
BATCH = 20_000


@dataclass
class Written:
    rows: int = 0
    spent_today_atomic: dict[str, int] = field(default_factory=dict)  # counted today, per agent
    newest_ids: dict[str, list[str]] = field(default_factory=dict)  # per agent, newest first (up to 50)


def _statuses(rng: random.Random) -> Iterator[str]:
    population = [status for status, weight in STATUS_MIX for _ in range(weight)]
    while True:
        yield rng.choice(population)


def _rows(
    *, org_id: str, agents: list[str], count: int, now: datetime, days: int, written: Written
) -> Iterator[tuple[object, ...]]:
    rng = random.Random(20261130)  # the same ledger every run
    statuses = _statuses(rng)
    decision = json.dumps({"outcome": "allow", "reasons": [], "policyVersion": 2, "host": HOST})
    payer = {agent: "0x" + f"{index + 1:040x}" for index, agent in enumerate(agents)}
    today = utc_day_start(now)
    span_s = days * 86_400
    newest: dict[str, list[tuple[datetime, str]]] = {agent: [] for agent in agents}
    # Evenly spaced in time, oldest first; agents take turns.
    for index in range(count):
        agent = agents[index % len(agents)]
        created = now - timedelta(seconds=span_s * (count - index) / count)
        status = next(statuses)
        amount = rng.randrange(1_000, 100_000)
        intent_id = f"pi_bulk{index:013x}"
        unix = int(created.timestamp())
        settled = created + timedelta(milliseconds=40) if status == "settled" else None
        valid_before = unix + VALIDITY_S - 60
        lapsed = status not in COUNTED_FOR_EVER and valid_before < int(now.timestamp())
        if not lapsed and created >= today:
            written.spent_today_atomic[agent] = written.spent_today_atomic.get(agent, 0) + amount
        newest[agent].append((created, intent_id))
        if len(newest[agent]) > 100:
            del newest[agent][:50]
        yield (
            intent_id,
            org_id,
            agent,
            f"bulk-{index}",
            "f" * 64,
            status,
            "agent",
            "GET",
            HOST,
            f"https://{HOST}/v1/search",
            "/v1/search",
            2,
            "eip155:84532",
            ASSET,
            PAY_TO,
            amount,
            payer[agent],
            "0x" + f"{index:064x}",
            unix - 60,
            valid_before,
            2,
            decision,
            "local_key",
            200 if status == "settled" else 500,
            ("0x" + f"{index:064x}") if status == "settled" else None,
            None if status == "settled" else "seller_error",
            created,
            created,
            created + timedelta(milliseconds=5),
            created + timedelta(milliseconds=30),
            settled,
            settled or created + timedelta(milliseconds=30),
            LAPSE_BLOCK if lapsed else None,
            valid_before + 2 if lapsed else None,
        )
        written.rows += 1
    for agent, entries in newest.items():
        entries.sort(reverse=True)
        written.newest_ids[agent] = [intent_id for _, intent_id in entries[:50]]


def write_payments(
    db: Database, *, org_id: str, agents: list[str], count: int, now: datetime, days: int = 365
) -> Written:
    """Write `count` finished payments of `agents` (of `org_id`), then refresh the planner's
    statistics on PostgreSQL (as autovacuum would after such a load)."""
    written = Written()
    rows = _rows(org_id=org_id, agents=agents, count=count, now=now, days=days, written=written)
    if db.is_sqlite:
        _sqlite(db, rows)
    else:
        _postgres(db, rows)
    return written


def _sqlite(db: Database, rows: Iterator[tuple[object, ...]]) -> None:
    path = db.url.removeprefix("sqlite:///")
    placeholders = ", ".join("?" for _ in COLUMNS)
    statement = f"INSERT INTO payment_intents ({', '.join(COLUMNS)}) VALUES ({placeholders})"
    connection = sqlite3.connect(path, timeout=30)
    try:
        batch: list[tuple[object, ...]] = []
        for row in rows:
            batch.append(
                tuple(value.strftime(SQLITE_TIME) if isinstance(value, datetime) else value for value in row)
            )
            if len(batch) >= BATCH:
                connection.executemany(statement, batch)
                batch.clear()
        if batch:
            connection.executemany(statement, batch)
        connection.commit()
    finally:
        connection.close()


def _postgres(db: Database, rows: Iterator[tuple[object, ...]]) -> None:
    url = db.url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(url) as connection:
        with (
            connection.cursor() as cursor,
            cursor.copy(f"COPY payment_intents ({', '.join(COLUMNS)}) FROM STDIN") as copy,
        ):
            for row in rows:
                copy.write_row(row)
        connection.commit()
        connection.execute("ANALYZE payment_intents")
