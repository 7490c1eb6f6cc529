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
from pathlib import Path
from typing import Any

import pytest

from server.kit.db import Database
from tests.bench import floor
from tests.bench.harness import BenchSettings, BenchTable, Row, rate, setting
from tests.bench.profiling import profiled
from tests.bench.servers import chain, fresh_block, load, paywarden
from tests.support.chain import TestToken, fresh_wallet
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = pytest.mark.timeout(1800)


def db_label(db: Database) -> str:
    return "SQLite" if db.is_sqlite else "PostgreSQL"


def ms_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} ms"


@pytest.mark.parametrize("client", ["lean", "official"])
def test_get_budget_per_second_from_one_process(
    db: Database, tmp_path: Path, client: str, bench: BenchSettings, table: BenchTable
) -> None:
    """get_budget, and right before it the floor, from the same sessions against the same process
    (the floor app: Paywarden's tools and `floor`), so that their ratio is of one machine state."""
    sessions = setting("BUSY_SESSIONS", 32, 32)
    with paywarden(db.url, tmp_path / "server", floor=True) as served:
        token = make_agent(db, served.settings, allow_hosts=["127.0.0.1"]).token
        floor_run = load(
            served,
            token,
            sessions=sessions,
            seconds=bench.throughput_seconds,
            calls=[floor.NAME],
            client=client,
        )
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
    assert floor_run["total"]["errors"] == 0, floor_run["error_samples"]
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
            client=client,
        )
    )
    share = total["per_second"] / floor_run["total"]["per_second"]
    table.add(
        Row(
            "get_budget throughput",
            db_label(db),
            case,
            "share of the floor's calls/s, same process, floor just before",
            f"{share:.0%} (floor {rate(floor_run['total']['per_second'])})",
            "≥ 50%" if client == "lean" else "",
            share >= 0.5 if client == "lean" else None,
            {"share": share},
            client=client,
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
                raw={"per_second": stats["per_second"]},
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
