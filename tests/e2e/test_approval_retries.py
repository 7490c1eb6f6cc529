"""An approved payment is judged again on its retry: the call's `maxAmountUsd`, the allowed hosts
and the wallet's balance still apply (each checked before anything is paid), and the approval
stays usable until the retry passes them. Real payments on anvil, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from server.kit.db import Database
from server.payments import decisions
from server.policy.service import PolicyChanges
from server.tenancy.service import get_agent
from server.wallets.service import import_local_key, parse_private_key
from tests.e2e.test_approvals import Money
from tests.support.chain import TestToken, fresh_wallet
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, error_of, mcp_client, structured
from tests.support.principals import OPERATOR
from tests.support.seller import Seller
from tests.support.tenants import change_policy, make_agent, make_member

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


def _swap_wallet(db: Database, server: RunningServer, agent_id: str, private_key: str) -> None:
    with db.write() as session:
        import_local_key(
            session,
            master=server.settings.master,
            agent=get_agent(session, OPERATOR, agent_id),
            private_key=parse_private_key(private_key),
            actor="test",
            now=server.services.clock.now(),
        )


async def test_a_retry_after_approval_runs_every_check_again(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    member = make_member(db, setup.org_id, role="admin")
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05"}))
        assert held["status"] == "pending_approval"
        with db.write() as session:
            decisions.decide_break_glass(
                session,
                OPERATOR,
                approval_id=held["approvalId"],
                approve=True,
                member_ref=member,
                via="cli_break_glass",
                now=paywarden.services.clock.now(),
            )
        key = held["idempotencyKey"]

        lower = error_of(
            await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.001", "idempotencyKey": key})
        )
        assert lower["code"] == "amount_exceeds_max"
        change_policy(db, setup.agent_id, PolicyChanges(allow_hosts=("api.example.com",)))
        moved = error_of(
            await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05", "idempotencyKey": key})
        )
        assert moved["code"] == "host_not_allowed"
        assert money.moved() == 0
        assert money.signatures("/premium") == 0
        status = structured(await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]}))
        assert status["status"] == "approved"  # still usable within its 10 minutes

        change_policy(db, setup.agent_id, PolicyChanges(allow_hosts=("127.0.0.1",)))
        _swap_wallet(db, paywarden, setup.agent_id, fresh_wallet()[1])  # an empty wallet now
        empty = error_of(
            await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05", "idempotencyKey": key})
        )
        assert empty["code"] == "insufficient_funds"
        _swap_wallet(db, paywarden, setup.agent_id, funded_wallet.private_key)
        paid = structured(
            await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05", "idempotencyKey": key})
        )
        assert (paid["status"], paid["replayed"]) == ("paid", False)
        assert money.moved() == 10_000
        assert money.signatures("/premium") == 1
