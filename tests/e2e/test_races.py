"""Caps that hold under concurrency: real `paywarden serve` processes (not threads) share one
database, and many fetch_paid calls race one daily cap against the local seller. Runs on SQLite
and on PostgreSQL, with real payments on anvil."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult
from sqlmodel import col, func, select

from server.kit.db import Database
from server.models import PaymentIntent
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import counted
from tests.support.chain import TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import chain_environ, mcp_client, settings_for
from tests.support.processes import serve_processes
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain, pytest.mark.slow]

PROCESSES = 4
CALLS = 200
PRICE = 10_000  # /premium: 0.01 USDC
CAP = "0.10"  # room for exactly 10 payments
CALL_TIMEOUT_S = 120
# At most 2 x 4 PostgreSQL connections per process: four servers stay far below max_connections
# (100 by default) even while other test runs share the database server.
POOL_SIZE = "4"


def environ(anvil: Any, test_usdc: TestToken) -> dict[str, str]:
    return {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_DATABASE_POOL_SIZE": POOL_SIZE,
    }


def outcome(result: CallToolResult) -> tuple[str, Any]:
    content = result.structured_content or {}
    if result.is_error:
        error = content.get("error", {})
        return error.get("code", "?"), error
    return content.get("status", "?"), content


async def call_everywhere(urls: list[str], token: str, calls: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Fire every call at once, spread over the servers, each server through its own client."""
    results: list[tuple[str, Any]] = [("?", None)] * len(calls)
    async with anyio.create_task_group() as group:
        for index, url in enumerate(urls):
            mine = list(range(index, len(calls), len(urls)))
            group.start_soon(_one_server, url, token, calls, mine, results)
    return results


async def _one_server(
    url: str, token: str, calls: list[dict[str, Any]], indexes: list[int], results: list[tuple[str, Any]]
) -> None:
    async with mcp_client(url, token) as client, anyio.create_task_group() as group:
        for index in indexes:

            async def call(index: int = index) -> None:
                results[index] = outcome(await client.call_tool("fetch_paid", calls[index]))

            group.start_soon(call)


def fresh_block(anvil: Any) -> None:
    """Mine a block now. anvil mines only on demand, so after the servers' start-up its newest block
    can be older than an authorisation's validAfter (a minute back) and the seller's simulation would
    call it not yet valid; a live chain (Base: a block every 2 s) never lags that far."""
    anvil.w3.provider.make_request("evm_mine", [])


def counted_spend(db: Database, agent_id: str) -> int:
    with db.read() as session:
        total = session.exec(
            select(func.coalesce(func.sum(PaymentIntent.amount_atomic), 0))
            .where(PaymentIntent.agent_id == agent_id)
            .where(counted(NEVER_SENT_FAILURES))
        ).one()
        return int(total)


def statuses(db: Database, agent_id: str) -> Counter[str]:
    with db.read() as session:
        return Counter(
            session.exec(select(PaymentIntent.status).where(col(PaymentIntent.agent_id) == agent_id))
        )


async def test_200_concurrent_payments_over_4_processes_pay_exactly_what_the_cap_allows(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    extra = environ(anvil, test_usdc)
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    seller_before = test_usdc.balance_of(seller.pay_to)
    signatures_before = seller.payment_signatures("/premium")
    with serve_processes(PROCESSES, database_url=db.url, extra=extra, workdir=tmp_path) as (
        public_url,
        servers,
    ):
        port = int(public_url.rsplit(":", 1)[1])
        settings = settings_for(database_url=db.url, port=port, extra=extra)
        setup = make_agent(
            db,
            settings,
            allow_hosts=["127.0.0.1"],
            max_per_tx="0.10",
            daily_cap=CAP,
            wallet_key=funded_wallet.private_key,
        )
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        calls = [{"url": seller.url("/premium"), "maxAmountUsd": "0.01"} for _ in range(CALLS)]
        fresh_block(anvil)
        started = time.monotonic()
        with anyio.fail_after(CALL_TIMEOUT_S):
            results = await call_everywhere([s.mcp_url for s in servers], setup.token, calls)
        elapsed = time.monotonic() - started

    kinds = Counter(kind for kind, _ in results)
    paid = [detail for kind, detail in results if kind == "paid"]
    denied = [detail for kind, detail in results if kind == "policy_denied"]
    expected = 10  # floor(0.10 / 0.01)
    assert kinds == {"paid": expected, "policy_denied": CALLS - expected}, (kinds, elapsed)
    assert all(detail["reasons"] == ["daily_cap_exceeded"] for detail in denied)
    assert len({detail["intentId"] for detail in paid}) == expected
    assert all(detail["replayed"] is False for detail in paid)

    moved = buyer_before - test_usdc.balance_of(funded_wallet.address)
    assert moved == expected * PRICE
    assert test_usdc.balance_of(seller.pay_to) - seller_before == moved
    assert seller.payment_signatures("/premium") - signatures_before == expected
    assert counted_spend(db, setup.agent_id) == moved
    assert statuses(db, setup.agent_id) == {"settled": expected}


async def test_20_concurrent_calls_with_one_key_pay_once(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    extra = environ(anvil, test_usdc)
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    signatures_before = seller.payment_signatures("/premium")
    with serve_processes(PROCESSES, database_url=db.url, extra=extra, workdir=tmp_path) as (
        public_url,
        servers,
    ):
        port = int(public_url.rsplit(":", 1)[1])
        settings = settings_for(database_url=db.url, port=port, extra=extra)
        setup = make_agent(db, settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key)
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        call = {"url": seller.url("/premium"), "idempotencyKey": "one-purchase-0001"}
        fresh_block(anvil)
        with anyio.fail_after(CALL_TIMEOUT_S):
            results = await call_everywhere([s.mcp_url for s in servers], setup.token, [call] * 20)

    fresh = [detail for kind, detail in results if kind == "paid" and detail["replayed"] is False]
    assert len(fresh) == 1, results
    intent_id = fresh[0]["intentId"]
    for kind, detail in results:
        assert kind in ("paid", "payment_in_progress"), (kind, detail)
        assert detail["intentId"] == intent_id
    assert buyer_before - test_usdc.balance_of(funded_wallet.address) == PRICE
    assert seller.payment_signatures("/premium") - signatures_before == 1
    assert statuses(db, setup.agent_id) == {"settled": 1}


async def test_the_approval_queue_holds_at_five_under_concurrency(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    extra = environ(anvil, test_usdc)
    signatures_before = seller.payment_signatures("/premium")
    with serve_processes(PROCESSES, database_url=db.url, extra=extra, workdir=tmp_path) as (
        public_url,
        servers,
    ):
        port = int(public_url.rsplit(":", 1)[1])
        settings = settings_for(database_url=db.url, port=port, extra=extra)
        # Every payment of this agent waits for a person: its step-up threshold is the price.
        setup = make_agent(
            db, settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key, step_up="0.01"
        )
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        calls = [{"url": seller.url("/premium")} for _ in range(20)]
        with anyio.fail_after(CALL_TIMEOUT_S):
            results = await call_everywhere([s.mcp_url for s in servers], setup.token, calls)

    kinds = Counter(kind for kind, _ in results)
    assert kinds == {"pending_approval": 5, "approval_queue_full": 15}, results
    assert {detail["reason"] for kind, detail in results if kind == "pending_approval"} == {"threshold"}
    assert statuses(db, setup.agent_id) == {"created": 5}
    assert seller.payment_signatures("/premium") == signatures_before
