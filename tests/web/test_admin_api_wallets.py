"""GET /api/v1/agents/{id}/wallets against a real server and anvil: the current wallet and the
retired one a rotation left, each with the balance the chain holds now and its sweeps; never a
key."""

from __future__ import annotations

import pytest
from sqlmodel import select

from auth.scopes import Scope
from server.kit.db import Database
from server.models import Wallet
from tests.support.admin_api import admin_token, call, problem
from tests.support.chain import Anvil, TestToken
from tests.support.paywarden import serve
from tests.support.sweeps import (
    NETWORK,
    SweepChain,
    rotated_agent,
    sweep_with_gas,
)

pytestmark = [pytest.mark.chain]


def test_the_list_shows_the_retired_wallet_with_its_balance_then_its_sweep(
    sqlite_db: Database, anvil: Anvil, test_usdc: TestToken
) -> None:
    chain = SweepChain(anvil, test_usdc, anvil.rpc_url)
    agent = rotated_agent(sqlite_db, chain, funded_atomic=4_200_000)
    extra = {**chain.environ(), "PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}
    with serve(sqlite_db.url, extra=extra) as server:
        reader = admin_token(sqlite_db, server, agent.setup.org_id, frozenset({Scope.ADMIN_READ}))

        listed = call(server, "get", f"/agents/{agent.setup.agent_id}/wallets", reader)

        assert listed.status_code == 200, listed.text
        body = listed.json()
        assert body["agentId"] == agent.setup.agent_id
        current, retired = body["wallets"]
        assert (current["state"], current["address"], current["retiredAt"]) == ("current", agent.new, None)
        assert (retired["state"], retired["walletId"], retired["address"]) == (
            "retired",
            agent.old_wallet_id,
            agent.old,
        )
        assert retired["retiredAt"] is not None
        assert retired["mode"] == "local_key"
        assert retired["balances"] == [
            {"network": NETWORK, "balanceUsd": "4.20", "balanceAtomic": 4_200_000, "balanceError": None}
        ]
        assert retired["sweeps"] == []
        with sqlite_db.read() as session:
            sealed = [
                row.sealed_secret
                for row in session.exec(select(Wallet).where(Wallet.agent_id == agent.setup.agent_id))
            ]
        assert all(value is not None and value.hex() not in listed.text for value in sealed)

        sweep_with_gas(sqlite_db, chain, agent.setup.agent_id)
        after = call(server, "get", f"/agents/{agent.setup.agent_id}/wallets", reader).json()

        current, retired = after["wallets"]
        assert current["balances"][0]["balanceUsd"] == "4.20"
        assert retired["balances"][0]["balanceUsd"] == "0.00"
        (sweep,) = retired["sweeps"]
        assert (sweep["status"], sweep["fromAddress"], sweep["toAddress"], sweep["amountUsd"]) == (
            "settled",
            agent.old,
            agent.new,
            "4.20",
        )
        assert sweep["txHash"].startswith("0x")
        problem(call(server, "get", "/agents/agt_missing/wallets", reader), 404, "agent_not_found")
