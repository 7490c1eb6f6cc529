"""What a paid fetch_paid costs on loopback, as a ratio to the bare x402 exchange it wraps.

Baseline: the same payment made directly (402, sign by hand, resend, settle on anvil, 200) with no
Paywarden in between. Measured: fetch_paid through the MCP client over HTTP against a running
Paywarden (policy, reservation, signing, audit, on-chain settlement check). Both run in this
process against the same seller and chain, alternately, so the machine's load affects both alike.
Run with `make bench`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator

import httpx
import pytest

from server.kit.db import Database
from tests.support.chain import TestToken, fresh_wallet
from tests.support.paywarden import RunningServer, chain_environ, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee
from tests.support.x402_wire import decode_header, sign_exact_payment

pytestmark = pytest.mark.anyio
ROUNDS = 25


@pytest.fixture
def paywarden(sqlite_db: Database, anvil: object, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)  # type: ignore[attr-defined]
    with serve(sqlite_db.url, extra=extra) as server:
        yield server


def _direct_payment(http: httpx.Client, seller: Seller, key: str) -> float:
    start = time.perf_counter()
    challenge = http.get(seller.url("/premium"))
    required = decode_header(challenge.headers["payment-required"])
    header = sign_exact_payment(required, private_key=key).header
    paid = http.get(seller.url("/premium"), headers={"PAYMENT-SIGNATURE": header})
    elapsed = time.perf_counter() - start
    assert paid.status_code == 200
    return elapsed


async def test_paid_fetch_paid_against_the_bare_exchange(
    paywarden: RunningServer, sqlite_db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    direct_address, direct_key = fresh_wallet()
    agent_address, agent_key = fresh_wallet()
    test_usdc.mint(direct_address, 10_000_000)
    test_usdc.mint(agent_address, 10_000_000)
    pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
    token = make_agent(
        sqlite_db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=agent_key, daily_cap="100"
    ).token

    direct: list[float] = []
    through: list[float] = []
    with httpx.Client() as http:
        async with mcp_client(paywarden.mcp_url, token) as client:
            for _ in range(3):  # warm both paths
                _direct_payment(http, seller, direct_key)
                structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            for _ in range(ROUNDS):
                direct.append(_direct_payment(http, seller, direct_key))
                start = time.perf_counter()
                result = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
                through.append(time.perf_counter() - start)
                assert result["status"] == "paid"

    base_ms = statistics.median(direct) * 1000
    paid_ms = statistics.median(through) * 1000
    p90_ms = sorted(through)[int(ROUNDS * 0.9)] * 1000
    print(
        f"\nbare x402 exchange: median {base_ms:.1f} ms; fetch_paid via MCP: median {paid_ms:.1f} ms "
        f"(p90 {p90_ms:.1f} ms); ratio {paid_ms / base_ms:.2f}x over {ROUNDS} rounds"
    )
