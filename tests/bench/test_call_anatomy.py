"""What one call does, counted rather than timed: SQL statements, transactions, audit events written
and chain RPC calls, for get_budget, list_payments, a free fetch_paid and a paid one.

The server runs in this process (the same app `paywarden serve` runs) so its database engine can be
watched; its RPC goes through the delay proxy with no delay, which counts the methods. Counts are per
call, averaged over a few calls after a warm-up, with the background jobs turned off so they add
nothing (on SQLite each transaction's own BEGIN counts as a statement: Paywarden sends it itself).
These are the numbers the hot path's work is about: each statement is a round trip, each
transaction a lock and a commit, each RPC call a trip to a node that may be far away.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from server.kit.db import Database
from server.services import build_services
from tests.bench.harness import BenchSettings, BenchTable, Row, infra_script
from tests.bench.servers import chain, fresh_block
from tests.support.chain import TestToken, free_port, fresh_wallet
from tests.support.paywarden import RunningServer, mcp_client, settings_for, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

CALLS_EACH = 5


class Tally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.statements: list[str] = []

    def statement(self, _conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        self.counts["statements"] += 1
        self.statements.append(" ".join(statement.split())[:90])
        if statement.lstrip().upper().startswith("INSERT INTO AUDIT_EVENTS"):
            self.counts["audit events"] += 1

    def begin(self, _conn: Any) -> None:
        self.counts["transactions"] += 1


@contextmanager
def watched(db: Database) -> Iterator[Tally]:
    tally = Tally()
    for engine in db.engines:  # SQLite's durable writes go through an engine of their own
        event.listen(engine, "before_cursor_execute", tally.statement)
        event.listen(engine, "begin", tally.begin)
    try:
        yield tally
    finally:
        for engine in db.engines:
            event.remove(engine, "before_cursor_execute", tally.statement)
            event.remove(engine, "begin", tally.begin)


async def test_what_one_call_does(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    tmp_path: Path,
    bench: BenchSettings,
    table: BenchTable,
) -> None:
    label = "SQLite" if db.is_sqlite else "PostgreSQL"
    buyer, buyer_key = fresh_wallet()
    test_usdc.mint(buyer, 1_000_000)
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    proxy_module = infra_script("rpc_delay_proxy")
    with proxy_module.RunningProxy(anvil.rpc_url, 0) as proxy:
        port = free_port()
        settings = settings_for(
            database_url=db.url, port=port, extra=chain(anvil, test_usdc.address, rpc_url=proxy.url)
        )
        services = build_services(settings)
        services.jobs.clear()  # only the calls themselves are counted
        with RunningServer(settings, port=port, services=services) as server:
            token = make_agent(db, settings, allow_hosts=["127.0.0.1"], wallet_key=buyer_key).token
            fresh_block(anvil)
            calls: dict[str, tuple[str, dict[str, Any]]] = {
                "get_budget": ("get_budget", {}),
                "list_payments": ("list_payments", {}),
                "fetch_paid, free URL": ("fetch_paid", {"url": seller.url("/free")}),
                "fetch_paid, paid": ("fetch_paid", {"url": seller.url("/premium")}),
            }
            async with mcp_client(server.mcp_url, token) as client:
                for tool, arguments in calls.values():  # warm every path once
                    structured(await client.call_tool(tool, arguments))
                for name, (tool, arguments) in calls.items():
                    proxy.app.reset()
                    with watched(services.db) as tally:
                        for _ in range(CALLS_EACH):
                            result = structured(await client.call_tool(tool, arguments))
                            if name == "fetch_paid, paid":
                                assert result["status"] == "paid", result
                    rpc = proxy.app.methods()
                    counts = {key: value / CALLS_EACH for key, value in tally.counts.items()}
                    rpc_total = sum(rpc.values()) / CALLS_EACH
                    rpc_text = ", ".join(
                        f"{method} {count / CALLS_EACH:g}" for method, count in sorted(rpc.items())
                    )
                    value = (
                        f"{counts.get('statements', 0):g} statements, "
                        f"{counts.get('transactions', 0):g} transactions, "
                        f"{counts.get('audit events', 0):g} audit events, {rpc_total:g} RPC calls"
                        + (f" ({rpc_text})" if rpc_text else "")
                    )
                    table.add(
                        Row(
                            "what one call does",
                            label,
                            name,
                            "per call",
                            value,
                            raw={**counts, "rpc_calls": rpc_total},
                        )
                    )
                    if name == "fetch_paid, paid":
                        print("  statements of one paid fetch_paid:")
                        for statement in tally.statements[: len(tally.statements) // CALLS_EACH]:
                            print("    " + statement)
