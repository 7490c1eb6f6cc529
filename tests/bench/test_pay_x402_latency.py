"""What a payment the agent sends itself costs, against fetch_paid buying the same thing.

Two ways to buy from the same seller, alternating round by round in one run, against one
`paywarden serve` process through the official MCP client:

- fetch_paid: Paywarden requests the URL, signs, sends the paid request and returns the body;
- the agent's own path: its client requests the URL (402), calls pay_x402 (Paywarden requests the
  URL again, checks the agent's copy, decides, signs, hands back the header), and its client sends
  the paid request itself. The pay_x402 call alone is timed too.

Both pay on anvil through the x402 SDK's seller. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from server.kit.db import Database
from tests.bench.harness import BenchSettings, BenchTable, Row, ms, percentile
from tests.bench.servers import chain, fresh_block, paywarden
from tests.support.chain import TestToken, fresh_wallet
from tests.support.handover import pay_args
from tests.support.paywarden import mcp_client, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee
from tests.support.x402_wire import PAYMENT_REQUIRED, decode_header

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(1800)]

WARM_ROUNDS = 3
ROUND_TIMEOUT_S = 30
PATH = "/premium"
BENCH = "pay_x402 vs fetch_paid"


async def test_pay_x402_against_fetch_paid(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    tmp_path: Path,
    bench: BenchSettings,
    table: BenchTable,
) -> None:
    rounds = bench.fetch_rounds
    address, key = fresh_wallet()
    test_usdc.mint(address, 2 * (rounds + WARM_ROUNDS + 5) * seller.prices[PATH])
    pin_payee(db, url=seller.url(PATH), pay_to=seller.pay_to)
    url = seller.url(PATH)
    samples: dict[str, list[float]] = {"fetch_paid": [], "agent": [], "pay_x402": []}

    with paywarden(db.url, tmp_path / "server", extra=chain(anvil, test_usdc.address)) as served:
        token = make_agent(
            db, served.settings, allow_hosts=["127.0.0.1"], wallet_key=key, daily_cap="1000", max_per_tx="1"
        ).token
        fresh_block(anvil)
        async with (
            mcp_client(served.mcp_url, token) as client,
            httpx.AsyncClient(timeout=ROUND_TIMEOUT_S) as http,
        ):

            async def fetch_paid() -> None:
                result = structured(await client.call_tool("fetch_paid", {"url": url}))
                assert result["status"] == "paid", result

            async def agent_sends() -> float:
                """The whole path; returns how long the pay_x402 call itself took."""
                asked = await http.get(url)
                assert asked.status_code == 402
                required = decode_header(asked.headers[PAYMENT_REQUIRED])
                started = time.perf_counter()
                signed = structured(await client.call_tool("pay_x402", pay_args(url, required)))
                took = time.perf_counter() - started
                assert signed["status"] == "signed", signed
                paid = await http.get(url, headers={signed["headerName"]: signed["headerValue"]})
                assert paid.status_code == 200, paid.text
                return took

            async def one_round(record: bool) -> None:
                with anyio.fail_after(ROUND_TIMEOUT_S):
                    started = time.perf_counter()
                    await fetch_paid()
                    fetched = time.perf_counter() - started
                    started = time.perf_counter()
                    call = await agent_sends()
                    whole = time.perf_counter() - started
                if record:
                    samples["fetch_paid"].append(fetched)
                    samples["agent"].append(whole)
                    samples["pay_x402"].append(call)

            for _ in range(WARM_ROUNDS):
                await one_round(record=False)
            for _ in range(rounds):
                await one_round(record=True)

    label = "SQLite" if db.is_sqlite else "PostgreSQL"
    case = f"{rounds} rounds, alternating, loopback anvil"
    p50 = {name: percentile(values, 0.5) for name, values in samples.items()}
    p99 = {name: percentile(values, 0.99) for name, values in samples.items()}
    table.add(
        Row(
            BENCH,
            label,
            case,
            "fetch_paid p50 / p99",
            f"{ms(p50['fetch_paid'])} / {ms(p99['fetch_paid'])}",
            raw={"p50_s": p50["fetch_paid"]},
            client="official",
        )
    )
    table.add(
        Row(
            BENCH,
            label,
            case,
            "agent's path (402, pay_x402, paid request) p50 / p99",
            f"{ms(p50['agent'])} / {ms(p99['agent'])}",
            raw={"p50_s": p50["agent"]},
            client="official",
        )
    )
    table.add(
        Row(
            BENCH,
            label,
            case,
            "pay_x402 call alone p50 / p99",
            f"{ms(p50['pay_x402'])} / {ms(p99['pay_x402'])}",
            raw={"p50_s": p50["pay_x402"]},
            client="official",
        )
    )
    path_ratio = p50["agent"] / p50["fetch_paid"]
    call_ratio = p50["pay_x402"] / p50["fetch_paid"]
    table.add(
        Row(
            BENCH,
            label,
            case,
            "ratio of p50s: agent's path, pay_x402 call, to fetch_paid",
            f"{path_ratio:.2f}, {call_ratio:.2f}",
            raw={"ratio": path_ratio, "call_ratio": call_ratio},
        )
    )
