"""What a paid fetch_paid costs, against the bare x402 exchange it wraps, and against a far chain node.

Three ways to buy the same thing from the same seller, alternating round by round in one run so the
machine's load falls on all alike:

- the floor: Coinbase's x402 SDK client (its httpx client, spend controls allowing the test token)
  paying the seller directly: 402, sign, pay, settle on anvil, 200; no policy, ledger or audit;
- fetch_paid through the official MCP client over HTTP to a `paywarden serve` process, and the same
  through the load test's lean client (infra/loadtest.py: one JSON-RPC POST, nothing else), since the
  official client spends several milliseconds of CPU per call on its side;
- the same against a second `paywarden serve` whose chain RPC sits behind a proxy adding
  `PAYWARDEN_BENCH_RPC_DELAY_MS` (100 ms) to every call, as a remote node would; the seller's
  facilitator keeps its direct line to anvil.

On SQLite and on PostgreSQL. The proxy also counts the RPC calls one paid fetch_paid makes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from server.kit.db import Database
from tests.bench.harness import BenchSettings, BenchTable, Row, infra_script, ms, percentile
from tests.bench.profiling import profiled
from tests.bench.servers import chain, fresh_block, paywarden, sdk_client
from tests.support.chain import TestToken, fresh_wallet
from tests.support.paywarden import mcp_client, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(1800)]

WARM_ROUNDS = 3
ROUND_TIMEOUT_S = 30
PATH = "/premium"


async def timed(call: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    with anyio.fail_after(ROUND_TIMEOUT_S):
        await call()
    return time.perf_counter() - start


def db_label(db: Database) -> str:
    return "SQLite" if db.is_sqlite else "PostgreSQL"


async def test_fetch_paid_against_the_x402_sdk_client(
    db: Database,
    anvil: Any,
    test_usdc: TestToken,
    seller: Seller,
    tmp_path: Path,
    bench: BenchSettings,
    table: BenchTable,
) -> None:
    rounds = bench.fetch_rounds
    funds = (rounds + WARM_ROUNDS + 5) * seller.prices[PATH]
    direct_address, direct_key = fresh_wallet()
    near_address, near_key = fresh_wallet()
    far_address, far_key = fresh_wallet()
    for address, arms_paying in ((direct_address, 1), (near_address, 2), (far_address, 1)):
        test_usdc.mint(address, funds * arms_paying)
    pin_payee(db, url=seller.url(PATH), pay_to=seller.pay_to)
    url = seller.url(PATH)
    cap = str(max(10, 2 * funds // 10_000))  # whole USD, far above what the rounds spend

    proxy_module = infra_script("rpc_delay_proxy")
    with (
        proxy_module.RunningProxy(anvil.rpc_url, bench.rpc_delay_ms) as proxy,
        paywarden(db.url, tmp_path / "near", extra=chain(anvil, test_usdc.address)) as near,
        paywarden(db.url, tmp_path / "far", extra=chain(anvil, test_usdc.address, rpc_url=proxy.url)) as far,
    ):
        near_token = make_agent(
            db, near.settings, allow_hosts=["127.0.0.1"], wallet_key=near_key, daily_cap=cap, name="near"
        ).token
        far_token = make_agent(
            db, far.settings, allow_hosts=["127.0.0.1"], wallet_key=far_key, daily_cap=cap, name="far"
        ).token
        samples: dict[str, list[float]] = {"sdk": [], "near": [], "lean": [], "far": []}
        lean = infra_script("loadtest").LeanSession(near.mcp_url, near_token)
        fresh_block(anvil)
        async with (
            sdk_client(direct_key, test_usdc.address) as http,
            mcp_client(near.mcp_url, near_token) as near_client,
            mcp_client(far.mcp_url, far_token) as far_client,
        ):

            async def direct() -> None:
                response = await http.get(url)
                assert response.status_code == 200, response.text

            async def through(client: Any) -> None:
                result = structured(await client.call_tool("fetch_paid", {"url": url}))
                assert result["status"] == "paid", result

            async def through_lean() -> None:
                result = await lean.call_tool("fetch_paid", {"url": url})
                assert not result.get("isError"), result
                assert result["structuredContent"]["status"] == "paid", result

            arms: dict[str, Callable[[], Awaitable[None]]] = {
                "sdk": direct,
                "near": lambda: through(near_client),
                "lean": through_lean,
                "far": lambda: through(far_client),
            }
            for _ in range(WARM_ROUNDS):
                for arm in arms.values():
                    await timed(arm)
            proxy.app.reset()
            with profiled(near.processes[0].pid, f"fetch_paid-{db_label(db)}", mode=bench.profile):
                for _ in range(rounds):
                    for name, arm in arms.items():
                        samples[name].append(await timed(arm))
            rpc_calls = proxy.app.methods()
            await lean.close()

    label = db_label(db)
    case = f"{rounds} rounds, alternating, loopback anvil"
    p50 = {name: percentile(values, 0.5) for name, values in samples.items()}
    p99 = {name: percentile(values, 0.99) for name, values in samples.items()}
    bench_name = "fetch_paid vs x402 SDK client"
    table.add(
        Row(bench_name, label, case, "x402 SDK client p50 / p99", f"{ms(p50['sdk'])} / {ms(p99['sdk'])}")
    )
    table.add(
        Row(
            bench_name,
            label,
            case,
            "fetch_paid p50 / p99",
            f"{ms(p50['near'])} / {ms(p99['near'])}",
            raw={"p50_s": p50["near"]},
            client="official",
        )
    )
    ratio = p50["near"] / p50["sdk"]
    table.add(
        Row(
            bench_name,
            label,
            case,
            "ratio of p50s",
            f"{ratio:.2f}",
            "≤ 1.25",
            ratio <= 1.25,
            {"ratio": ratio},
        )
    )
    table.add(Row(bench_name, label, case, "ratio of p99s", f"{p99['near'] / p99['sdk']:.2f}"))
    lean_ratio = p50["lean"] / p50["sdk"]
    table.add(
        Row(
            bench_name,
            label,
            case,
            "lean client: fetch_paid p50 / p99, ratio of p50s",
            f"{ms(p50['lean'])} / {ms(p99['lean'])}, {lean_ratio:.2f}",
            raw={"p50_s": p50["lean"], "ratio": lean_ratio},
        )
    )

    far_name = f"fetch_paid, RPC {bench.rpc_delay_ms} ms away"
    far_case = f"{rounds} rounds, same run"
    table.add(
        Row(
            far_name,
            label,
            far_case,
            "fetch_paid p50 / p99",
            f"{ms(p50['far'])} / {ms(p99['far'])}",
            raw={"p50_s": p50["far"]},
            client="official",
        )
    )
    added = p50["far"] - p50["near"]
    table.add(
        Row(far_name, label, far_case, "added p50", ms(added), "< 10 ms", added < 0.010, {"added_s": added})
    )
    per_payment = ", ".join(
        f"{method} {count / rounds:.1f}" for method, count in sorted(rpc_calls.items(), key=lambda kv: -kv[1])
    )
    total = sum(rpc_calls.values()) / rounds
    table.add(Row(far_name, label, far_case, "RPC calls per paid call", f"{total:.1f} ({per_payment})"))
