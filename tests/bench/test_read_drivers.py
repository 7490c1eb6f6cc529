"""A read's database work two ways, on PostgreSQL: through the thread hand-off every read takes
today (`Database.run`: a blocking session in a worker thread, one hand-off per call) and through
SQLAlchemy's asyncio engine on psycopg's async driver (no thread; the statements run on the event
loop). The same three statements a budget read makes (the agent, its newest policy version, a
counted sum), from 32 tasks at once for `PAYWARDEN_BENCH_THROUGHPUT_SECONDS`, then one at a time:
calls/s and p50, and the ratio of async to threads. What this measures is the mechanism, not the
server: the MCP transport and the bearer check are the same either way."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from server.kit.db import Database
from tests.bench.harness import BenchSettings, BenchTable, Row, percentile, rate, setting
from tests.support.databases import migrated_database
from tests.support.paywarden import settings_for
from tests.support.tenants import make_agent

pytestmark = [pytest.mark.timeout(600), pytest.mark.anyio]

AGENT = text("SELECT id, org_id, team_id, member_id, disabled_at FROM agents WHERE id = :agent")
POLICY = text(
    "SELECT id FROM policy_versions WHERE org_id = :org AND agent_id = :agent ORDER BY version DESC LIMIT 1"
)
SPENT = text(
    "SELECT coalesce(sum(amount_atomic), 0), count(*) FROM payment_intents "
    "WHERE org_id = :org AND agent_id = :agent AND authorized_at >= now() - interval '1 day'"
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _drive(call: Callable[[], Awaitable[None]], *, tasks: int, seconds: float) -> tuple[float, float]:
    """calls/s and p50 (s) of `call` from `tasks` tasks for `seconds`."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        while time.monotonic() < deadline:
            began = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - began)

    began = time.monotonic()
    async with anyio.create_task_group() as group:
        for _ in range(tasks):
            group.start_soon(worker)
    return len(latencies) / (time.monotonic() - began), percentile(latencies, 0.5)


async def test_a_read_through_threads_and_through_the_async_driver(
    tmp_path: Path, bench: BenchSettings, table: BenchTable
) -> None:
    sessions = setting("BUSY_SESSIONS", 32, 32)
    with migrated_database("postgres", tmp_path) as db:
        agent = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"])
        params = {"agent": agent.agent_id, "org": agent.org_id}
        threaded = Database(db.url, pool_size=10)
        engine = create_async_engine(db.url, pool_size=10)

        def blocking_read() -> None:
            with threaded.read() as session:
                for statement in (AGENT, POLICY, SPENT):
                    session.execute(statement, params).all()

        async def through_threads() -> None:
            await threaded.run(blocking_read)

        async def through_the_async_driver() -> None:
            async with engine.connect() as conn:
                for statement in (AGENT, POLICY, SPENT):
                    (await conn.execute(statement, params)).all()

        results: dict[str, dict[int, tuple[float, float]]] = {}
        try:
            for name, call in (("threads", through_threads), ("async driver", through_the_async_driver)):
                await _drive(call, tasks=sessions, seconds=1)  # warm the pools and the statements
                results[name] = {
                    n: await _drive(call, tasks=n, seconds=bench.throughput_seconds) for n in (sessions, 1)
                }
        finally:
            threaded.dispose()
            await engine.dispose()

    for name, by_tasks in results.items():
        for n, (per_second, p50_s) in by_tasks.items():
            table.add(
                Row(
                    "a read's database work",
                    "PostgreSQL",
                    f"3 statements, {n} task{'s' if n > 1 else ''} at once, {name}",
                    "calls/s; p50",
                    f"{rate(per_second)}; {p50_s * 1000:.2f} ms",
                    raw={"per_second": per_second},
                )
            )
    for n in (sessions, 1):
        ratio = results["async driver"][n][0] / results["threads"][n][0]
        table.add(
            Row(
                "a read's database work",
                "PostgreSQL",
                f"3 statements, {n} task{'s' if n > 1 else ''} at once",
                "calls/s, async driver ÷ threads",
                f"{ratio:.2f}",
            )
        )
