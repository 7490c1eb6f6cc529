"""SIGTERM to a real `paywarden serve` process, as a rolling restart sends it, in the middle of
calls: a paid call whose seller holds the signature, and a call waiting for a person's approval.

Nothing is lost: the chain shows exactly one transfer, the call is answered, or its idempotency
key, replayed on another process, names the same payment; the intent is never left half-written;
the process exits 0 within PAYWARDEN_SHUTDOWN_GRACE_SECONDS and lets its job leases go. The proxy
of the deployment is not the subject: the clients talk to the processes directly, on SQLite.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult
from sqlmodel import select

from server.kit.clock import SystemClock, as_utc
from server.kit.db import Database
from server.models import JobLease, PaymentIntent
from tests.support.chain import TestToken
from tests.support.elicitation import LEGACY, MODERN, UrlElicitations, eliciting_client
from tests.support.fixtures_chain import FundedWallet
from tests.support.haproxy import HAProxy
from tests.support.hostile_seller import Exchange, HostileSeller
from tests.support.paywarden import chain_environ, error_of, mcp_client, settings_for, structured
from tests.support.processes import ServeProcess, serve_processes
from tests.support.tenants import AgentSetup, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

GRACE_S = 6  # PAYWARDEN_SHUTDOWN_GRACE_SECONDS of the stopped processes: calls get 5 s of it
EXIT_MARGIN_S = 4.0  # the interpreter's own exit after the server stopped, on a busy machine
ANSWER_STALL_S = 2.0  # a seller that answers this long after it settled: within the grace
PROMPT_S = 3.0  # a wait for a person ends this soon after SIGTERM, far below the grace
CALL_TIMEOUT_S = 60
PROXY_CHECKS_S = 6.0  # past the proxy's health checks marking a stopped replica down (2 x 2 s)
FACILITATOR_ACCOUNT = 5  # anvil account paying this module's seller's gas (unused elsewhere)


class SlowSeller(HostileSeller):
    """Settles a payment on chain as soon as it arrives, then takes its time to answer."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settled: set[str] = set()  # paths whose payment is on chain, answer still to come

    async def scenario_settle_then_stall(self, ex: Exchange) -> None:
        await self._settle_then_answer(ex, ANSWER_STALL_S)

    async def scenario_settle_then_hang(self, ex: Exchange) -> None:
        # Longer than any grace period: the answer never arrives while the buyer runs.
        await self._settle_then_answer(ex, 120.0)

    async def _settle_then_answer(self, ex: Exchange, stall_s: float) -> None:
        offer = self.offer()
        if not await self._ask(ex, offer):
            return
        result = await self.settle(ex, offer)
        self.settled.add(ex.path)
        await asyncio.sleep(stall_s)
        receipt = self.receipt(success=True, transaction=result.transaction)
        await ex.respond(200, b'{"data": "premium"}', PAYMENT_RESPONSE=receipt)


@pytest.fixture(scope="module", name="slow_seller")
def fixture_slow_seller(anvil: Any, test_usdc: TestToken) -> Iterator[SlowSeller]:
    from tests.support.chain import fresh_wallet

    pay_to, _ = fresh_wallet()
    other, _ = fresh_wallet()
    seller = SlowSeller(
        token_address=test_usdc.address,
        pay_to=pay_to,
        other_pay_to=other,
        rpc_url=anvil.rpc_url,
        facilitator_key=anvil.accounts[FACILITATOR_ACCOUNT].private_key,
    ).start()
    try:
        yield seller
    finally:
        seller.stop()


def environ(anvil: Any, test_usdc: TestToken, **more: str) -> dict[str, str]:
    return {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_SHUTDOWN_GRACE_SECONDS": str(GRACE_S),
        **more,
    }


def agent_for(db: Database, public_url: str, extra: dict[str, str], wallet: FundedWallet) -> AgentSetup:
    settings = settings_for(database_url=db.url, port=int(public_url.rsplit(":", 1)[1]), extra=extra)
    return make_agent(db, settings, allow_hosts=["127.0.0.1"], wallet_key=wallet.private_key)


def intents(db: Database, agent_id: str) -> list[PaymentIntent]:
    with db.read() as session:
        return list(session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent_id)))


def fresh_block(anvil: Any) -> None:
    """anvil mines on demand: a block now, so an authorisation valid from a minute back is valid."""
    anvil.w3.provider.make_request("evm_mine", [])


async def until(condition: Any, *, timeout_s: float, what: str) -> None:
    """Poll (bounded) until `condition()` holds."""
    deadline = anyio.current_time() + timeout_s
    while not condition():
        assert anyio.current_time() < deadline, f"not {what} within {timeout_s} s"
        await anyio.sleep(0.05)  # bounded polling of what another process does


async def stop_and_time(server: ServeProcess) -> tuple[int, float]:
    """SIGTERM, then the exit code and how long the process took to exit."""
    started = time.monotonic()
    server.send_sigterm()
    code = await anyio.to_thread.run_sync(server.wait_exit, GRACE_S + EXIT_MARGIN_S)
    return code, time.monotonic() - started


async def test_sigterm_while_the_seller_holds_the_signature_finishes_the_payment_and_exits_0(
    sqlite_db: Database,
    anvil: Any,
    test_usdc: TestToken,
    slow_seller: SlowSeller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    db = sqlite_db
    extra = environ(anvil, test_usdc, PAYWARDEN_BACKGROUND_JOBS="1")
    path = slow_seller.path("settle-then-stall")
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    with serve_processes(1, database_url=db.url, extra=extra, workdir=tmp_path) as (public_url, servers):
        (server,) = servers
        setup = agent_for(db, public_url, extra, funded_wallet)
        pin_payee(db, url=slow_seller.url(path), pay_to=slow_seller.pay_to)
        fresh_block(anvil)
        # The process holds its jobs' leases before it is stopped.
        await until(lambda: len(leases(db)) > 0, timeout_s=30, what="leases taken")
        result: list[CallToolResult] = []
        async with mcp_client(server.mcp_url, setup.token) as client:
            await client.list_tools()

            async def call() -> None:
                result.append(await client.call_tool("fetch_paid", {"url": slow_seller.url(path)}))

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                # The seller has the signature and settled it; its answer is still to come.
                await until(lambda: path in slow_seller.settled, timeout_s=CALL_TIMEOUT_S, what="settled")
                stopped = anyio.current_time()
                code, took = await stop_and_time(server)
        answered_after = anyio.current_time() - stopped

        assert code == 0, server.output()
        assert took < GRACE_S + EXIT_MARGIN_S
        assert answered_after >= ANSWER_STALL_S - 1.0  # the call was not cut short: it waited
        paid = structured(result[0])
        assert paid["status"] == "paid"
        assert paid["replayed"] is False
        # Exactly one transfer, one signature at the seller, one intent, recorded past `submitted`.
        assert buyer_before - test_usdc.balance_of(funded_wallet.address) == slow_seller_price()
        assert slow_seller.signatures(path) == 1
        (intent,) = intents(db, setup.agent_id)
        assert intent.id == paid["intentId"]
        assert intent.status in ("settlement_pending", "settled")
        # The leases went with the process: another holder may take them at once.
        now = SystemClock().now()
        assert leases(db)
        assert all(as_utc(row.expires_at) <= now for row in leases(db))


async def test_sigterm_while_the_seller_never_answers_says_outcome_unknown_and_a_replay_elsewhere_pays_once(
    sqlite_db: Database,
    anvil: Any,
    test_usdc: TestToken,
    slow_seller: SlowSeller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    db = sqlite_db
    extra = environ(anvil, test_usdc)
    path = slow_seller.path("settle-then-hang")
    key = f"graceful-{secrets.token_hex(6)}"
    arguments = {"url": slow_seller.url(path), "idempotencyKey": key}
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    with serve_processes(2, database_url=db.url, extra=extra, workdir=tmp_path) as (public_url, servers):
        stopped_one, other = servers
        setup = agent_for(db, public_url, extra, funded_wallet)
        pin_payee(db, url=slow_seller.url(path), pay_to=slow_seller.pay_to)
        fresh_block(anvil)
        result: list[CallToolResult] = []
        async with mcp_client(stopped_one.mcp_url, setup.token) as client:
            await client.list_tools()

            async def call() -> None:
                result.append(await client.call_tool("fetch_paid", arguments))

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await until(lambda: path in slow_seller.settled, timeout_s=CALL_TIMEOUT_S, what="settled")
                code, took = await stop_and_time(stopped_one)

        assert code == 0, stopped_one.output()
        assert took < GRACE_S + EXIT_MARGIN_S
        # The seller never answered: the call still gets an answer before the process goes, one
        # that names the payment and its key instead of a dropped connection.
        error = error_of(result[0])
        assert error["code"] == "payment_outcome_unknown"
        assert error["idempotencyKey"] == key
        # Nothing half-written: `submitted` was durable before the signature left, and stays so,
        # for the reconciler or a replay.
        (intent,) = intents(db, setup.agent_id)
        assert intent.status == "submitted"
        assert error["intentId"] == intent.id

        # The agent retries with its key on the other process: the same payment, not a second one.
        async with mcp_client(other.mcp_url, setup.token) as client:
            replay = structured(await client.call_tool("fetch_paid", arguments))
        assert (replay["status"], replay["replayed"]) == ("paid", True)
        assert replay["intentId"] == intent.id
        assert slow_seller.signatures(path) == 1
        assert buyer_before - test_usdc.balance_of(funded_wallet.address) == slow_seller_price()
        (after,) = intents(db, setup.agent_id)
        assert after.status == "settled"


async def test_sigterm_answers_a_call_waiting_for_approval_with_pending_approval_at_once(
    sqlite_db: Database,
    anvil: Any,
    test_usdc: TestToken,
    slow_seller: SlowSeller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    db = sqlite_db
    # The wait for a person is far longer than the grace: only the stop can end it in time.
    extra = environ(anvil, test_usdc, PAYWARDEN_APPROVAL_WAIT_MS="120000")
    path = slow_seller.path("honest")  # a payee never seen before: the payment is held
    with serve_processes(1, database_url=db.url, extra=extra, workdir=tmp_path) as (public_url, servers):
        (server,) = servers
        setup = agent_for(db, public_url, extra, funded_wallet)
        elicitations = UrlElicitations("accept")
        result: list[CallToolResult] = []
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            await client.list_tools()  # as agents do first: the result is checked against it
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    result.append(await client.call_tool("fetch_paid", {"url": slow_seller.url(path)}))
                    answered.append(anyio.current_time())
                    done.set()

                answered: list[float] = []
                done = anyio.Event()
                group.start_soon(call)
                with anyio.fail_after(CALL_TIMEOUT_S):
                    await elicitations.asked.wait()
                await anyio.sleep(0.5)  # the call is now waiting for the decision
                assert not result
                stopped = anyio.current_time()
                server.send_sigterm()
                with anyio.fail_after(PROMPT_S):
                    await done.wait()
            code = await anyio.to_thread.run_sync(server.wait_exit, GRACE_S + EXIT_MARGIN_S)

        assert answered[0] - stopped < PROMPT_S
        pending = structured(result[0])
        assert pending["status"] == "pending_approval"
        assert pending["approvalUrl"] == elicitations.only().url
        assert pending["idempotencyKey"]
        assert pending["approvalPrompt"] == "accepted"
        assert code == 0, server.output()
        assert slow_seller.signatures(path) == 0
        (intent,) = intents(db, setup.agent_id)
        assert intent.status == "created"  # still held, for a retry with the key once decided


async def test_a_replica_stopping_behind_the_proxy_of_infra_loses_no_call(
    sqlite_db: Database, anvil: Any, test_usdc: TestToken, funded_wallet: FundedWallet, tmp_path: Path
) -> None:
    """A rolling restart as the proxy sees it: one of two replicas gets SIGTERM while calls without
    a session keep coming through infra/haproxy.cfg; every call is answered, by the replica that
    stays once the other has closed its port."""
    db = sqlite_db
    extra = environ(anvil, test_usdc)
    with serve_processes(2, database_url=db.url, extra=extra, workdir=tmp_path) as (public_url, servers):
        setup = agent_for(db, public_url, extra, funded_wallet)
        stopping, staying = servers
        answered: list[str] = []
        with HAProxy([server.base_url for server in servers], tmp_path) as proxy:
            async with eliciting_client(
                f"{proxy.url}/mcp", setup.token, mode=MODERN, elicitations=None
            ) as client:
                await client.list_tools()

                async def calls_for(seconds: float) -> None:
                    deadline = anyio.current_time() + seconds
                    while anyio.current_time() < deadline:
                        budget = structured(await client.call_tool("get_budget", {}))
                        answered.append(budget["agentId"])

                await calls_for(1.0)
                before = len(answered)
                async with anyio.create_task_group() as group:
                    group.start_soon(calls_for, PROXY_CHECKS_S)
                    code, _ = await stop_and_time(stopping)
            served = proxy.requests_per_replica()
        assert code == 0, stopping.output()
        assert len(answered) > before + 10  # calls kept coming during the stop, and were all answered
        assert set(answered) == {setup.agent_id}
        assert served["replica1"] > 0
        assert served["replica2"] > 0
        assert staying.ready()


def leases(db: Database) -> list[JobLease]:
    with db.read() as session:
        return list(session.exec(select(JobLease)))


def slow_seller_price() -> int:
    from tests.support.hostile_seller import PRICE

    return PRICE
