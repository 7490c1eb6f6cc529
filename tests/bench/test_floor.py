"""The MCP floor: `floor`, a tool that does nothing (tests/bench/floor.py), called as get_budget is
in the other benchmarks, on a server of its own with the same stack (HTTP server, bearer check,
MCP SDK, schemas).

- one call at a time for `PAYWARDEN_BENCH_THROUGHPUT_SECONDS`: p50 and p99, from the load test's
  lean client and from the official MCP client;
- `PAYWARDEN_BENCH_BUSY_SESSIONS` (32) sessions calling it back to back on one process: calls/s.

The run keeps both as its floor (`BenchTable.floors`): every p50 and every rate of the table is
also shown as a multiple of the floor of its database, for the same client. Runs first, so that
its numbers are taken on the machine the rest is; on SQLite and PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from server.kit.db import Database
from tests.bench import floor
from tests.bench.harness import BenchSettings, BenchTable, Floor, Row, rate, setting
from tests.bench.profiling import profiled
from tests.bench.servers import load, paywarden
from tests.support.tenants import make_agent

pytestmark = pytest.mark.timeout(900)

CLIENTS = {"lean": "lean client", "official": "official MCP client"}


def db_label(db: Database) -> str:
    return "SQLite" if db.is_sqlite else "PostgreSQL"


def test_mcp_floor(db: Database, tmp_path: Path, bench: BenchSettings, table: BenchTable) -> None:
    label = db_label(db)
    sessions = setting("BUSY_SESSIONS", 32, 32)
    p50_s: dict[str, float] = {}
    per_second: dict[str, float] = {}
    with paywarden(db.url, tmp_path / "server", floor=True) as served:
        token = make_agent(db, served.settings, allow_hosts=["127.0.0.1"]).token
        for client, client_name in CLIENTS.items():
            alone = load(
                served, token, sessions=1, seconds=bench.throughput_seconds, calls=[floor.NAME], client=client
            )["total"]
            assert alone["errors"] == 0, alone
            p50_s[client] = alone["p50_ms"] / 1000
            table.add(
                Row(
                    "MCP floor",
                    label,
                    f"1 process, one call at a time, {client_name}",
                    "p50 / p99",
                    f"{alone['p50_ms']:.2f} ms / {alone['p99_ms']:.2f} ms",
                    raw={"p50_s": p50_s[client], "p99_s": alone["p99_ms"] / 1000},
                    client=client,
                )
            )
        for client, client_name in CLIENTS.items():
            with profiled(served.processes[0].pid, f"floor-{label}-{client}", mode=bench.profile):
                result = load(
                    served,
                    token,
                    sessions=sessions,
                    seconds=bench.throughput_seconds,
                    calls=[floor.NAME],
                    client=client,
                )
            busy = result["total"]
            assert busy["errors"] == 0, result["error_samples"]
            per_second[client] = busy["per_second"]
            table.add(
                Row(
                    "MCP floor",
                    label,
                    f"1 process, {sessions} sessions, {client_name}",
                    "calls/s; p50 / p99; client CPU per call",
                    f"{rate(busy['per_second'])}; {busy['p50_ms']:.1f} ms / {busy['p99_ms']:.1f} ms; "
                    f"{result['client_cpu_ms_per_call']:.2f} ms",
                    raw={"per_second": busy["per_second"]},
                    client=client,
                )
            )
    table.floors[label] = Floor(p50_s=p50_s, per_second=per_second)
