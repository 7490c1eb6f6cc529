"""pay_x402 through the official TypeScript MCP SDK's client: a small ES module run with Node.js 22
(tests/support/node/pay_x402_client.mjs) plays an agent that makes its requests itself. It pays the
x402 SDK's seller on anvil with the header Paywarden hands it, reports the seller's settlement
header, and asks again with the same key; the SDK checks every result against its output schema."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from server.kit.db import Database
from tests.e2e.test_approvals import Money
from tests.support.chain import Anvil, TestToken
from tests.support.conformance import NODE_MODULES, node22
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, chain_environ, serve
from tests.support.plugin import require
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee
from tests.support.x402_wire import decode_header

pytestmark = [pytest.mark.chain]

SCRIPT = Path(__file__).resolve().parents[1] / "support" / "node" / "pay_x402_client.mjs"
SDK = NODE_MODULES / "@modelcontextprotocol" / "sdk" / "package.json"
MISSING = "Node.js 22 or the MCP TypeScript SDK is not installed: run `make test-deps`"
PREMIUM = 10_000
RUN_TIMEOUT_S = 60


@pytest.fixture
def server(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller
) -> Iterator[RunningServer]:
    pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
    with serve(
        sqlite_db.url, extra=chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    ) as running:
        yield running


def _run(node: Path, *arguments: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(node), str(SCRIPT), *arguments],
        cwd=SCRIPT.parent,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def test_an_agent_on_the_typescript_sdk_pays_with_the_header_it_is_handed(
    server: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    node = node22()
    if node is None or not SDK.is_file():
        require(MISSING)
    assert json.loads(SDK.read_text())["version"] == "1.32.2"  # the version package.json pins
    setup = make_agent(
        sqlite_db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    money = Money(test_usdc, seller, funded_wallet.address)

    seen = _run(node, server.mcp_url, setup.token, seller.url("/premium"))

    assert {"pay_x402", "report_receipt"} <= set(seen["tools"])
    signed = seen["signed"]
    assert (seen["askedStatus"], signed["status"], signed["headerName"]) == (
        402,
        "signed",
        "PAYMENT-SIGNATURE",
    )
    assert (seen["paidStatus"], seen["body"]["ok"]) == (200, True)
    assert money.moved() == PREMIUM
    assert money.signatures("/premium") == 1
    transaction = decode_header(seen["paymentResponse"])["transaction"]
    reported = seen["reported"]
    assert (reported["intentId"], reported["paymentResponse"]) == (
        signed["intentId"],
        seen["paymentResponse"],
    )
    assert (reported["status"], reported["receipt"]["txHash"]) == ("settled", transaction)
    replay = seen["replay"]
    assert (replay["replayed"], replay["headerValue"]) == (True, signed["headerValue"])
    assert money.moved() == PREMIUM
