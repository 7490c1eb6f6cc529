"""GET /api/v1/agents/{id}/wallet against a real server and a real chain (anvil with TestUSDC): the
address, how it signs and the balance the chain holds now; when the chain cannot be read, or does
not answer in time, `balance` is null and `balanceError` says why; the key never comes back."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from sqlmodel import select

from auth.scopes import Scope
from server.kit.db import Database
from server.models import Wallet
from tests.support.admin_api import admin_token, call, problem
from tests.support.chain import Anvil, TestToken, free_port
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import chain_environ, serve
from tests.support.tenants import make_agent

pytestmark = [pytest.mark.chain]


@pytest.fixture
def silent_rpc() -> Iterator[str]:
    """An RPC URL whose server takes the connection and never answers."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_the_wallet_shows_its_balance_from_the_chain_and_never_its_key(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000",
    }
    with serve(sqlite_db.url, extra=extra) as server:
        paying = make_agent(
            sqlite_db, server.settings, allow_hosts=["api.example.com"], wallet_key=funded_wallet.private_key
        )
        bare = make_agent(
            sqlite_db, server.settings, allow_hosts=["api.example.com"], org_id=paying.org_id, name="bare"
        )
        reader = admin_token(sqlite_db, server, paying.org_id, frozenset({Scope.ADMIN_READ}))

        shown = call(server, "get", f"/agents/{paying.agent_id}/wallet", reader)
        assert shown.status_code == 200, shown.text
        assert shown.json() == {
            "agentId": paying.agent_id,
            "network": "eip155:84532",
            "address": funded_wallet.address,
            "mode": "local_key",
            "balanceUsd": "10.00",
            "balanceAtomic": 10_000_000,
            "balanceError": None,
        }
        test_usdc.mint(funded_wallet.address, 2_500_000)  # read from the chain now, not remembered
        assert (
            call(server, "get", f"/agents/{paying.agent_id}/wallet", reader).json()["balanceUsd"] == "12.50"
        )
        with sqlite_db.read() as session:
            (row,) = session.exec(select(Wallet).where(Wallet.agent_id == paying.agent_id)).all()
        assert row.sealed_secret is not None
        key_hex = funded_wallet.private_key.removeprefix("0x").lower()
        assert key_hex not in shown.text.lower()
        assert row.sealed_secret.hex() not in shown.text

        none = call(server, "get", f"/agents/{bare.agent_id}/wallet", reader).json()
        assert (none["address"], none["mode"], none["balanceUsd"], none["balanceError"]) == (
            None,
            None,
            None,
            "no_wallet",
        )
        problem(call(server, "get", "/agents/agt_missing/wallet", reader), 404, "agent_not_found")


@pytest.mark.parametrize("dead", ["refused", "silent"])
def test_a_chain_that_cannot_be_read_gives_no_balance_and_says_why(
    sqlite_db: Database, test_usdc: TestToken, funded_wallet: FundedWallet, silent_rpc: str, dead: str
) -> None:
    rpc_url = silent_rpc if dead == "silent" else f"http://127.0.0.1:{free_port()}"
    extra = {
        **chain_environ(rpc_url=rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000",
    }
    with serve(sqlite_db.url, extra=extra) as server:
        agent = make_agent(
            sqlite_db, server.settings, allow_hosts=["api.example.com"], wallet_key=funded_wallet.private_key
        )
        reader = admin_token(sqlite_db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
        started = time.monotonic()
        shown = call(server, "get", f"/agents/{agent.agent_id}/wallet", reader)
        took = time.monotonic() - started
        assert shown.status_code == 200, shown.text
        body = shown.json()
        assert (body["address"], body["balanceUsd"], body["balanceAtomic"]) == (
            funded_wallet.address,
            None,
            None,
        )
        assert body["balanceError"] == ("timeout" if dead == "silent" else "chain_unavailable")
        assert took < 6  # a short timeout, not the RPC client's own
