"""get_budget's wallet health against a real server and a real chain (anvil with TestUSDC): the
wallet's balance on each network the policy pays on, exact to the atomic unit; a warning
`wallet_low_balance` when it holds less than one day of the agent's caps; and a chain that refuses
or never answers gives `balanceUsd: null` with a reason, within the timeout, the rest intact.

The chain is the subject, not SQL: SQLite only."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from decimal import Decimal

import pytest

from server.kit.db import Database
from server.payments.wallet_health import BALANCE_TIMEOUT_S
from server.policy.service import PolicyChanges
from server.vocabulary import BASE, BASE_SEPOLIA
from tests.support.chain import Anvil, TestToken, free_port, fresh_wallet
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import chain_environ, mcp_client, serve, structured
from tests.support.tenants import change_policy, make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


@pytest.fixture
def silent_rpc() -> Iterator[str]:
    """An RPC URL whose server takes the connection and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def low_balance(budget: dict[str, object]) -> list[dict[str, object]]:
    warnings = budget["warnings"]
    assert isinstance(warnings, list)
    return [w for w in warnings if w["code"] == "wallet_low_balance"]


async def test_the_wallet_balance_is_the_chains_and_warns_below_a_days_caps(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    test_usdc.mint(funded_wallet.address, 1234)  # 10.001234 USDC: shown to the atomic unit
    short_address, short_key = fresh_wallet()
    test_usdc.mint(short_address, 19_999_999)  # one atomic unit less than a day of its caps
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(sqlite_db.url, extra=extra) as server:
        rich = make_agent(
            sqlite_db, server.settings, allow_hosts=["api.example.com"], wallet_key=funded_wallet.private_key
        )
        # Pays on two networks; only Base Sepolia has an RPC here.
        change_policy(sqlite_db, rich.agent_id, PolicyChanges(networks=(BASE_SEPOLIA, BASE)))
        short = make_agent(
            sqlite_db,
            server.settings,
            allow_hosts=["api.example.com"],
            daily_cap="20.00",
            wallet_key=short_key,
        )
        bare = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"])

        async with mcp_client(server.mcp_url, rich.token) as client:
            budget = structured(await client.call_tool("get_budget", {}))
        assert budget["wallet"] == {
            "address": funded_wallet.address,
            "balances": [
                {"network": BASE_SEPOLIA, "balanceUsd": "10.001234", "reason": None},
                {"network": BASE, "balanceUsd": None, "reason": "no_rpc"},
            ],
        }
        assert low_balance(budget) == []  # 10.001234 holds a day of a 10.00 cap
        assert budget["dailyCapUsd"] == "10.00"

        async with mcp_client(server.mcp_url, short.token) as client:
            budget = structured(await client.call_tool("get_budget", {}))
        assert budget["wallet"]["balances"] == [
            {"network": BASE_SEPOLIA, "balanceUsd": "19.999999", "reason": None}
        ]
        assert low_balance(budget) == [
            {
                "code": "wallet_low_balance",
                "network": BASE_SEPOLIA,
                "wallet": short_address,
                "balanceUsd": "19.999999",
                "dayCapUsd": "20.00",
            }
        ]

        # The caps set the day: with a daily cap of 5.00, 19.999999 is more than a day's worth.
        change_policy(sqlite_db, short.agent_id, PolicyChanges(daily_cap_usd=Decimal("5.00")))
        async with mcp_client(server.mcp_url, short.token) as client:
            budget = structured(await client.call_tool("get_budget", {}))
        assert low_balance(budget) == []

        async with mcp_client(server.mcp_url, bare.token) as client:
            budget = structured(await client.call_tool("get_budget", {}))
        assert budget["wallet"] is None
        assert low_balance(budget) == []


@pytest.mark.parametrize("dead", ["refused", "silent"])
async def test_a_chain_that_cannot_be_read_leaves_the_rest_of_the_budget(
    sqlite_db: Database, test_usdc: TestToken, funded_wallet: FundedWallet, silent_rpc: str, dead: str
) -> None:
    rpc_url = silent_rpc if dead == "silent" else f"http://127.0.0.1:{free_port()}"
    # Both networks the policy pays on have the same dead RPC: they are asked at once.
    extra = {
        **chain_environ(rpc_url=rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_RPC_URLS": json.dumps({BASE_SEPOLIA: rpc_url, BASE: rpc_url}),
        "PAYWARDEN_ASSETS": json.dumps({BASE_SEPOLIA: test_usdc.address, BASE: test_usdc.address}),
    }
    with serve(sqlite_db.url, extra=extra) as server:
        agent = make_agent(
            sqlite_db,
            server.settings,
            allow_hosts=["api.example.com"],
            daily_cap="20.00",
            wallet_key=funded_wallet.private_key,
        )
        change_policy(sqlite_db, agent.agent_id, PolicyChanges(networks=(BASE_SEPOLIA, BASE)))
        async with mcp_client(server.mcp_url, agent.token) as client:
            started = time.monotonic()
            budget = structured(await client.call_tool("get_budget", {}))
            took = time.monotonic() - started
    reason = "timeout" if dead == "silent" else "chain_unavailable"
    assert budget["wallet"] == {
        "address": funded_wallet.address,
        "balances": [
            {"network": BASE_SEPOLIA, "balanceUsd": None, "reason": reason},
            {"network": BASE, "balanceUsd": None, "reason": reason},
        ],
    }
    assert low_balance(budget) == []  # an unknown balance warns of nothing
    assert (budget["agentId"], budget["dailyCapUsd"], budget["spentTodayUsd"], budget["capLevel"]) == (
        agent.agent_id,
        "20.00",
        "0.00",
        "ok",
    )
    assert budget["effectiveCap"]["remainingUsd"] == "20.00"
    # One timeout for both networks, not one each, and not the RPC client's own (10 s).
    assert took < BALANCE_TIMEOUT_S + 1.5
