"""Reads over a big ledger: list_payments and get_budget through MCP with 10^6 payment rows in one
organisation (`PAYWARDEN_BENCH_ROWS`).

The rows are finished payments of one agent spread over a year (so its weekly rule and its
organisation's monthly rule each sum thousands of them), written with COPY or executemany. The
organisation also has a daily and a monthly limit rule, so get_budget sums at every scope. Calls are
made one after the other to one `paywarden serve` process, so each number is the latency of one call
on an idle server: from the load test's lean client (one JSON-RPC POST; infra/loadtest.py), and for
list_payments also from the official MCP client, which adds its own CPU time per call. Before
measuring, the answers are checked against the rows: get_budget counts exactly today's spend,
list_payments returns the newest rows.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import pytest

from server.kit.clock import SystemClock
from server.kit.money import atomic_to_usd, format_usd
from tests.bench.data import add_org_rule
from tests.bench.harness import BenchSettings, BenchTable, Row, infra_script, ms, percentile
from tests.bench.profiling import profiled
from tests.bench.servers import paywarden
from tests.support.databases import migrated_database
from tests.support.payment_rows import write_payments
from tests.support.paywarden import mcp_client, structured
from tests.support.tenants import make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(1800)]

WARM_CALLS = 5
CALL_TIMEOUT_S = 60
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "list_payments": ("list_payments", {}),
    "list_payments, limit 50": ("list_payments", {"limit": 50}),
    "list_payments, status failed": ("list_payments", {"status": "failed"}),
    "get_budget": ("get_budget", {}),
}
OFFICIAL = "list_payments, official MCP client"


def ok(result: dict[str, Any]) -> None:
    assert not result.get("isError"), result


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_reads_over_a_large_ledger(
    kind: str, tmp_path: Path, bench: BenchSettings, table: BenchTable
) -> None:
    label = "SQLite" if kind == "sqlite" else "PostgreSQL"
    rows = bench.ledger_rows
    with migrated_database(kind, tmp_path) as db, paywarden(db.url, tmp_path / "server") as served:
        setup = make_agent(db, served.settings, allow_hosts=["api.example.com"], daily_cap="1000000")
        now = SystemClock().now()
        with db.write() as session:
            for window in ("day", "month"):
                add_org_rule(
                    session,
                    org_id=setup.org_id,
                    kind="limit",
                    host=None,
                    path_prefix=None,
                    limit_usd=Decimal("10000000"),
                    window=window,
                    now=now,
                )
        began = time.monotonic()
        written = write_payments(db, org_id=setup.org_id, agents=[setup.agent_id], count=rows, now=now)
        print(f"\n  {label}: {written.rows:,} payment rows written in {time.monotonic() - began:.1f} s")

        samples: dict[str, list[float]] = {name: [] for name in CALLS}
        samples[OFFICIAL] = []
        lean = infra_script("loadtest").LeanSession(served.mcp_url, setup.token)
        async with mcp_client(served.mcp_url, setup.token) as client:
            budget = structured(await client.call_tool("get_budget", {}))
            expected_today = atomic_to_usd(written.spent_today_atomic.get(setup.agent_id, 0))
            assert budget["spentTodayUsd"] == format_usd(expected_today), budget
            newest = structured(await client.call_tool("list_payments", {"limit": 50}))
            assert [p["intentId"] for p in newest["payments"]] == written.newest_ids[setup.agent_id]

            for tool, arguments in CALLS.values():
                for _ in range(WARM_CALLS):
                    structured(await client.call_tool(tool, arguments))
                    ok(await lean.call_tool(tool, arguments))
            with profiled(served.processes[0].pid, f"reads-{label}", mode=bench.profile):
                for _ in range(bench.read_calls):
                    for name, (tool, arguments) in CALLS.items():
                        start = time.perf_counter()
                        with anyio.fail_after(CALL_TIMEOUT_S):
                            ok(await lean.call_tool(tool, arguments))
                        samples[name].append(time.perf_counter() - start)
                    start = time.perf_counter()
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        structured(await client.call_tool("list_payments", {}))
                    samples[OFFICIAL].append(time.perf_counter() - start)
            await lean.close()

    case = f"{rows:,} rows in one organisation"
    for name, values in samples.items():
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        target, met = "", None
        if name == "list_payments":
            target, met = "p99 < 20 ms", p99 < 0.020
        table.add(
            Row(
                "reads over a large ledger",
                label,
                case,
                f"{name} p50 / p99",
                f"{ms(p50)} / {ms(p99)}",
                target,
                met,
                {"p50_s": p50, "p99_s": p99},
                client="official" if name == OFFICIAL else "lean",
            )
        )
