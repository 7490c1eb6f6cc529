"""A payment before and after the master key's rotation, end to end: the agent's wallet key, sealed
under the old key, signs again under the new one, the server started with the old key no longer
starts, and the audit chain written under both verifies. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from server.app import create_app
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.wallets.master_key import MasterKeyMismatch
from tests.support.chain import Anvil, TestToken
from tests.support.cli import run_cli
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import (
    TEST_MASTER_KEY,
    RunningServer,
    chain_environ,
    mcp_client,
    serve,
    settings_for,
    structured,
)
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

NEW_KEY = MasterKey(b"\x42" * 32).encode()
PREMIUM = 10_000  # 0.01 USDC


async def _pay(mcp_url: str, token: str, url: str) -> dict[str, object]:
    async with mcp_client(mcp_url, token) as client:
        return structured(await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05"}))


async def test_a_server_started_with_the_new_key_pays_and_verifies_the_audit_chain(
    db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller, funded_wallet: FundedWallet
) -> None:
    chain = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(db.url, extra=chain) as before:
        token = make_agent(
            db, before.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        ).token
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        first = await _pay(before.mcp_url, token, seller.url("/premium"))
    assert first["status"] == "paid"
    balance = test_usdc.balance_of(funded_wallet.address)

    rotated = run_cli(
        db.url,
        *("admin", "master-key", "rotate", "--from-env", "NEW_KEY", "--json"),
        master_key=TEST_MASTER_KEY,
        env={"NEW_KEY": NEW_KEY},
    )
    assert rotated.json()["resealed"]["wallet keys"] == 1

    # The old key no longer starts a server: the one line, before anything is served.
    old = create_app(settings_for(database_url=db.url, port=8402, extra=chain))
    with pytest.raises(MasterKeyMismatch, match="PAYWARDEN_MASTER_KEY does not match"):
        async with old.router.lifespan_context(old):
            pass

    # On the same port: the agent's token names the server's URL as its audience.
    settings = settings_for(
        database_url=db.url, port=before.port, extra={**chain, "PAYWARDEN_MASTER_KEY": NEW_KEY}
    )
    with RunningServer(settings, port=before.port) as after:
        second = await _pay(after.mcp_url, token, seller.url("/premium"))
    assert second["status"] == "paid"
    assert second["intentId"] != first["intentId"]
    assert second["receipt"]["state"] == "settled"  # type: ignore[index]
    assert test_usdc.balance_of(funded_wallet.address) == balance - PREMIUM

    verified = run_cli(db.url, "audit", "verify", "--json", master_key=NEW_KEY)
    assert verified.exit_code == 0, verified.stdout + verified.stderr
    events = run_cli(
        db.url, "admin", "audit", "events", "--kind", "master_key.", "--json", master_key=NEW_KEY
    )
    assert events.exit_code == 0, events.stderr
    assert "master_key.rotated" in events.stdout
