"""Many MCP sessions at once on loopback, driven by infra/loadtest.py in a process of its own.

- get_budget per second from one `paywarden serve` process, with `PAYWARDEN_BENCH_BUSY_SESSIONS`
  (32) sessions calling it back to back; once with the load test's lean client and once with the
  official MCP client, to show which of the two is the bottleneck;
- `PAYWARDEN_BENCH_SESSIONS` (200) sessions for `PAYWARDEN_BENCH_SESSION_SECONDS` (60 s) against
  `paywarden serve --workers 2`, each calling get_budget then fetch_paid of the seller's free route in
  a loop: throughput, p50, p99 and errors. `PAYWARDEN_BENCH_PAID_EVERY=N` adds a paid fetch_paid on
  every n-th round; it is off by default because the test seller settles one payment at a time
  (about 15 a second here), so paid calls from 200 sessions would measure its queue, not Paywarden.

On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from server.kit.db import Database
from tests.bench.harness import BenchSettings, BenchTable, Row, infra_path, rate, setting
from tests.bench.profiling import profiled
from tests.bench.servers import Served, chain, fresh_block, paywarden
from tests.support.chain import TestToken, fresh_wallet
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = pytest.mark.timeout(1800)

WARMUP_S = 3.0


def db_label(db: Database) -> str:
    return "SQLite" if db.is_sqlite else "PostgreSQL"


def load(
    served: Served, token: str, *, sessions: int, seconds: float, calls: list[Any], client: str = "lean"
) -> dict[str, Any]:
    command = [
        sys.executable,
        str(infra_path("loadtest")),
        "--url",
        served.mcp_url,
        "--sessions",
        str(sessions),
        "--seconds",
        str(seconds),
        "--warmup",
        str(WARMUP_S),
        "--client",
        client,
    ]
    for call in calls:
        command += ["--call", call if isinstance(call, str) else json.dumps(call)]
    environ = {**os.environ, "PAYWARDEN_LOADTEST_TOKEN": token}
    finished = subprocess.run(
        command, env=environ, capture_output=True, text=True, timeout=seconds + WARMUP_S + 300, check=False
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    result: dict[str, Any] = json.loads(finished.stdout)
    return result


def ms_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


@pytest.mark.parametrize("client", ["lean", "official"])
def test_get_budget_per_second_from_one_process(
    db: Database, tmp_path: Path, client: str, bench: BenchSettings, table: BenchTable
) -> None:
    sessions = setting("BUSY_SESSIONS", 32, 32)
    with paywarden(db.url, tmp_path / "server") as served:
        token = make_agent(db, served.settings, allow_hosts=["127.0.0.1"]).token
        with profiled(served.processes[0].pid, f"get_budget-{db_label(db)}-{client}", mode=bench.profile):
            result = load(
                served,
                token,
                sessions=sessions,
                seconds=bench.throughput_seconds,
                calls=["get_budget"],
                client=client,
            )
    total = result["total"]
    case = (
        f"1 process, {sessions} sessions, {'official MCP client' if client == 'official' else 'lean client'}"
    )
    assert total["errors"] == 0, result["error_samples"]
    table.add(
        Row(
            "get_budget throughput",
            db_label(db),
            case,
            "calls/s",
            rate(total["per_second"]),
            "≥ 500" if client == "lean" else "",
            total["per_second"] >= 500 if client == "lean" else None,
            {"per_second": total["per_second"]},
        )
    )
    table.add(
        Row(
            "get_budget throughput",
            db_label(db),
            case,
            "p50 / p99; client CPU per call",
            f"{ms_or_dash(total['p50_ms'])} / {ms_or_dash(total['p99_ms'])}; "
            f"{result['client_cpu_ms_per_call']:.2f} ms",
        )
    )


def test_many_sessions_against_two_workers(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    tmp_path: Path,
    bench: BenchSettings,
    table: BenchTable,
) -> None:
    buyer, buyer_key = fresh_wallet()
    test_usdc.mint(buyer, 100_000_000)
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    calls: list[Any] = [
        "get_budget",
        {"label": "fetch_paid, free", "tool": "fetch_paid", "arguments": {"url": seller.url("/free")}},
    ]
    paid_every = setting("PAID_EVERY", 0, 0)
    if paid_every:
        paid = {"url": seller.url("/premium")}
        calls.append(
            {"label": "fetch_paid, paid", "tool": "fetch_paid", "arguments": paid, "every": paid_every}
        )
    with paywarden(db.url, tmp_path / "server", extra=chain(anvil, test_usdc.address), workers=2) as served:
        token = make_agent(
            db, served.settings, allow_hosts=["127.0.0.1"], wallet_key=buyer_key, daily_cap="1000"
        ).token
        fresh_block(anvil)
        with profiled(
            served.processes[0].pid, f"sessions-{db_label(db)}", mode=bench.profile, subprocesses=True
        ):
            result = load(served, token, sessions=bench.sessions, seconds=bench.session_seconds, calls=calls)

    label = db_label(db)
    case = f"{bench.sessions} sessions, {bench.session_seconds:.0f} s, --workers 2"
    case += f", paid every {paid_every} rounds" if paid_every else ""
    total = result["total"]
    name = "many sessions"
    table.add(
        Row(name, label, case, "calls/s", rate(total["per_second"]), raw={"per_second": total["per_second"]})
    )
    p99_met = total["p99_ms"] is not None and total["p99_ms"] < 250
    table.add(
        Row(
            name,
            label,
            case,
            "p50 / p99, every call",
            f"{ms_or_dash(total['p50_ms'])} / {ms_or_dash(total['p99_ms'])}",
            "p99 < 250 ms",
            p99_met,
        )
    )
    for call_label, stats in result["by_label"].items():
        table.add(
            Row(
                name,
                label,
                case,
                f"{call_label}: calls/s, p50 / p99",
                f"{rate(stats['per_second'])}, {ms_or_dash(stats['p50_ms'])} / {ms_or_dash(stats['p99_ms'])}",
            )
        )
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(result["error_kinds"].items()))
    table.add(
        Row(
            name,
            label,
            case,
            "errors",
            f"{total['errors']} of {total['calls']:,}" + (f" ({kinds})" if kinds else ""),
            "0",
            total["errors"] == 0,
        )
    )
    if result["error_samples"]:
        print("  error samples:", json.dumps(result["error_samples"], indent=2)[:3000])
