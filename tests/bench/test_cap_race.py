"""A cap race at scale: 2,000 fetch_paid calls at once over four `paywarden serve` processes on
PostgreSQL, for one agent whose daily cap has room for exactly 200 payments. The calls travel over
`PAYWARDEN_BENCH_RACE_CONNECTIONS` (125) connections per server, each connection sending its share
one after the other, so every call is in flight during the race.

Measured: paid calls per second (200 over the time until the last paid call answered) and calls per
second. Checked, as a money test would: exactly 200 calls paid and the rest were denied for the cap;
exactly 200 transfers left the wallet on-chain, for exactly 200 times the price, all to the seller;
the sellers saw 200 signed payments; the ledger counts exactly the cap: nothing overspent.

The sellers are Coinbase's x402 SDK middleware, each with its own facilitator key (so their
settlements do not queue on one key's nonces), `PAYWARDEN_BENCH_RACE_SELLERS` of them (4), all paying
the same address; calls go to them in turn. Their facilitators settle synchronously, which bounds
paid/s here as much as Paywarden does: a second line says how fast the same sellers are paid by
Coinbase's x402 SDK client directly, the same number of payments at once.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import func
from sqlmodel import col, select

from server.kit.db import Database
from server.models import PaymentIntent
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import counted
from tests.bench.harness import BenchSettings, BenchTable, Row, infra_script, rate, setting
from tests.bench.profiling import profiled
from tests.bench.servers import chain, fresh_block, paywarden, sdk_client
from tests.support.chain import TestToken, fresh_wallet
from tests.support.databases import migrated_database
from tests.support.fixtures_chain import FACILITATOR_ACCOUNT
from tests.support.seller import Seller, start_seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(1800)]

PROCESSES = 4
PRICE = 10_000  # 0.01 USDC
CALL_TIMEOUT_S = 600
TRANSFER_TOPIC = "0x" + "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


@pytest.fixture
def sellers(anvil: Any, test_usdc: TestToken, bench: BenchSettings) -> Iterator[list[Seller]]:
    pay_to, _ = fresh_wallet()
    keys = [account.private_key for account in anvil.accounts[FACILITATOR_ACCOUNT + 1 :]]
    assert len(keys) >= bench.race_sellers, "one anvil dev account per seller's facilitator"
    with ExitStack() as stack:
        running = []
        for key in keys[: bench.race_sellers]:
            seller = start_seller(
                rpc_url=anvil.rpc_url,
                token_address=test_usdc.address,
                pay_to=pay_to,
                facilitator_key=key,
                routes={"/premium": PRICE},
            )
            stack.callback(seller.stop)
            running.append(seller)
        yield running


def outcome(result: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    content = dict(result.get("structuredContent") or {})
    if result.get("isError"):
        error = dict(content.get("error") or {})
        return str(error.get("code", "?")), error
    return str(content.get("status", "?")), content


async def race(
    urls: list[str], token: str, calls: list[dict[str, Any]], connections: int
) -> list[tuple[str, dict[str, Any], float]]:
    """Every call in flight at once, spread over the servers, over `connections` connections per
    server (the load test's lean client: the official one would spend more CPU than the servers);
    each result with the time it arrived."""
    lean_session = infra_script("loadtest").LeanSession
    results: list[tuple[str, dict[str, Any], float]] = [("?", {}, 0.0)] * len(calls)

    async def connection(url: str, indexes: list[int]) -> None:
        session = lean_session(url, token)
        try:
            for index in indexes:
                kind, detail = outcome(await session.call_tool("fetch_paid", calls[index]))
                results[index] = (kind, detail, time.monotonic())
        finally:
            await session.close()

    async with anyio.create_task_group() as group:
        for offset, url in enumerate(urls):
            mine = list(range(offset, len(calls), len(urls)))
            for lane in range(min(connections, len(mine))):
                group.start_soon(connection, url, mine[lane::connections])
    return results


def transfers_from(anvil: Any, token: str, sender: str, from_block: int) -> list[dict[str, Any]]:
    topic = "0x" + "0" * 24 + sender.lower().removeprefix("0x")
    logs = anvil.w3.eth.get_logs(
        {"fromBlock": from_block, "toBlock": "latest", "address": token, "topics": [TRANSFER_TOPIC, topic]}
    )
    return list(logs)


async def sellers_alone(sellers: list[Seller], test_usdc: TestToken, payments: int) -> float:
    """Paid/s of the same sellers paid directly by the x402 SDK client, as many payments at once."""
    address, key = fresh_wallet()
    test_usdc.mint(address, (payments + 5) * PRICE)
    async with sdk_client(key, test_usdc.address, timeout_s=CALL_TIMEOUT_S) as http:

        async def pay(index: int) -> None:
            response = await http.get(sellers[index % len(sellers)].url("/premium"))
            assert response.status_code == 200, response.text

        started = time.monotonic()
        with anyio.fail_after(CALL_TIMEOUT_S):
            async with anyio.create_task_group() as group:
                for index in range(payments):
                    group.start_soon(pay, index)
        return payments / (time.monotonic() - started)


def ledger_totals(db: Database, agent_id: str) -> tuple[int, Counter[str]]:
    with db.read() as session:
        spent = session.exec(
            select(func.coalesce(func.sum(PaymentIntent.amount_atomic), 0))
            .where(PaymentIntent.agent_id == agent_id)
            .where(counted(NEVER_SENT_FAILURES))
        ).one()
        statuses = Counter(
            str(status)
            for status in session.exec(
                select(PaymentIntent.status).where(col(PaymentIntent.agent_id) == agent_id)
            )
        )
    return int(spent), statuses


async def test_cap_race_over_four_processes(
    anvil: Any,
    test_usdc: TestToken,
    sellers: list[Seller],
    tmp_path: Path,
    bench: BenchSettings,
    table: BenchTable,
) -> None:
    calls_total, allowed = bench.race_calls, bench.race_paid
    connections = setting("RACE_CONNECTIONS", 125, 125)
    buyer, buyer_key = fresh_wallet()
    test_usdc.mint(buyer, (allowed + 50) * PRICE)
    pay_to = sellers[0].pay_to
    cap_usd = f"{allowed * PRICE / 1_000_000:.2f}"
    with migrated_database("postgres", tmp_path) as db:
        with paywarden(
            db.url, tmp_path / "servers", extra=chain(anvil, test_usdc.address), count=PROCESSES
        ) as served:
            setup = make_agent(
                db,
                served.settings,
                allow_hosts=["127.0.0.1"],
                max_per_tx="0.10",
                daily_cap=cap_usd,
                wallet_key=buyer_key,
            )
            pin_payee(db, url=sellers[0].url("/premium"), pay_to=pay_to)
            calls = [
                {"url": sellers[index % len(sellers)].url("/premium"), "maxAmountUsd": "0.01"}
                for index in range(calls_total)
            ]
            buyer_before = test_usdc.balance_of(buyer)
            seller_before = test_usdc.balance_of(pay_to)
            fresh_block(anvil)
            first_block = int(anvil.w3.eth.block_number) + 1
            started = time.monotonic()
            with (
                profiled(served.processes[0].pid, "cap-race-PostgreSQL", mode=bench.profile),
                anyio.fail_after(CALL_TIMEOUT_S),
            ):
                urls = [p.mcp_url for p in served.processes]
                results = await race(urls, setup.token, calls, connections)
            elapsed = time.monotonic() - started
        spent, statuses = ledger_totals(db, setup.agent_id)
    moved = buyer_before - test_usdc.balance_of(buyer)
    received = test_usdc.balance_of(pay_to) - seller_before
    transfers = transfers_from(anvil, test_usdc.address, buyer, first_block)
    signatures = sum(seller.payment_signatures("/premium") for seller in sellers)
    alone = await sellers_alone(sellers, test_usdc, allowed)  # after the counts: it pays them too

    kinds = Counter(kind for kind, _, _ in results)
    paid = [(detail, at) for kind, detail, at in results if kind == "paid"]
    last_paid = max((at for _, at in paid), default=started) - started
    overspend = max(0, moved - allowed * PRICE)

    case = (
        f"{calls_total:,} calls over {min(connections * PROCESSES, calls_total)} connections, "
        f"cap for {allowed}, {PROCESSES} processes, {len(sellers)} sellers"
    )
    paid_per_second = len(paid) / last_paid if last_paid > 0 else 0.0
    table.add(
        Row(
            "cap race",
            "PostgreSQL",
            case,
            "paid/s",
            rate(paid_per_second),
            "≥ 100",
            paid_per_second >= 100,
            {"paid_per_second": paid_per_second, "per_second": paid_per_second},
        )
    )
    answered = calls_total / elapsed
    table.add(
        Row(
            "cap race",
            "PostgreSQL",
            case,
            "calls/s (all answered)",
            rate(answered),
            raw={"per_second": answered},
        )
    )
    table.add(
        Row(
            "cap race",
            "PostgreSQL",
            f"the same sellers alone, {allowed} payments at once",
            "paid/s (x402 SDK client)",
            rate(alone),
        )
    )
    exact = len(paid) == allowed and len(transfers) == allowed and moved == allowed * PRICE
    table.add(
        Row(
            "cap race",
            "PostgreSQL",
            case,
            "paid on-chain / overspend",
            f"{len(transfers)} transfers, {moved / 1_000_000:.2f} USDC / {overspend / 1_000_000:.2f} USDC",
            f"exactly {allowed} / 0",
            exact and overspend == 0,
        )
    )

    assert kinds == {"paid": allowed, "policy_denied": calls_total - allowed}, (kinds, elapsed)
    assert all(
        detail["reasons"] == ["daily_cap_exceeded"] for kind, detail, _ in results if kind == "policy_denied"
    )
    assert len({detail["intentId"] for detail, _ in paid}) == allowed
    assert moved == allowed * PRICE
    assert received == moved
    assert len(transfers) == allowed
    assert signatures == allowed
    assert spent == moved
    assert sum(statuses.values()) == allowed
    assert set(statuses) <= {"settled", "settlement_pending", "submitted"}, statuses
