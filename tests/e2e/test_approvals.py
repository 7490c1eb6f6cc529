"""Holds, end to end against the local seller: a held payment signs nothing; decided with the
CLI and retried with the same key it pays exactly once; denied and expired holds move nothing.
Runs on SQLite and PostgreSQL with real payments on anvil."""

from __future__ import annotations

from typing import Any

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import AuditEvent
from tests.support.chain import TestToken
from tests.support.cli import run_cli
from tests.support.clocks import ShiftedClock
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import HostileSeller, fixture_hostile_seller  # noqa: F401
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, make_member, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC
REPORT = 500_000  # 0.50 USDC


def _extra(anvil: Any, test_usdc: TestToken) -> dict[str, str]:
    return chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)


class Money:
    """Balances and the seller's signature counter, to tell that nothing (or exactly X) moved."""

    def __init__(self, token: TestToken, seller: Seller, buyer: str) -> None:
        self.token, self.seller, self.buyer = token, seller, buyer
        self.buyer_start = token.balance_of(buyer)
        self.seller_start = token.balance_of(seller.pay_to)
        self.signatures_start = seller.payment_signature_counts

    def moved(self) -> int:
        spent = self.buyer_start - self.token.balance_of(self.buyer)
        assert self.token.balance_of(self.seller.pay_to) - self.seller_start == spent
        return spent

    def signatures(self, path: str) -> int:
        return self.seller.payment_signatures(path) - self.signatures_start.get(path, 0)


def _audit(db: Database, org_id: str, type_: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(
            session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id, AuditEvent.type == type_))
        )


async def test_a_new_payee_is_held_decided_with_the_cli_and_paid_once(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    member = make_member(db, setup.org_id, role="approver")
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")

    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05"}))
        assert held["status"] == "pending_approval"
        assert held["reason"] == "new_pay_to"
        assert held["thresholdUsd"] is None
        assert held["amountUsd"] == "0.01"
        assert held["host"] == "127.0.0.1"
        assert held["approvalId"].startswith("apr_")
        assert held["approvalUrl"] == f"{paywarden.settings.public_url}/approvals/{held['approvalId']}"
        key = held["idempotencyKey"]
        retry = {"url": url, "maxAmountUsd": "0.05", "idempotencyKey": key}

        # Asking again before anyone decided: the same hold, still nothing signed.
        again = structured(await client.call_tool("fetch_paid", retry))
        assert (again["status"], again["approvalId"]) == ("pending_approval", held["approvalId"])
        status = structured(await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]}))
        assert status["status"] == "pending"
        assert money.moved() == 0
        assert money.signatures("/premium") == 0

        inbox = run_cli(db.url, "admin", "approvals", "list", "--org", setup.org_id, "--json").json()
        (listed,) = inbox["approvals"]
        assert (listed["approvalId"], listed["status"], listed["payTo"]) == (
            held["approvalId"],
            "pending",
            seller.pay_to,
        )
        decided = run_cli(
            db.url,
            "admin",
            "approvals",
            "decide",
            held["approvalId"],
            "approve",
            "--member",
            member,
            "--json",
        ).json()
        assert decided["status"] == "approved"
        assert decided["decidedBy"] == member

        paid = structured(await client.call_tool("fetch_paid", retry))
        assert paid["status"] == "paid"
        assert paid["replayed"] is False
        assert paid["idempotencyKey"] == key
        assert paid["receipt"]["state"] == "settled"
        replay = structured(await client.call_tool("fetch_paid", retry))
        assert (replay["status"], replay["replayed"], replay["intentId"]) == ("paid", True, paid["intentId"])
        status = structured(await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]}))
        assert (status["status"], status["intentId"]) == ("approved", paid["intentId"])
        assert money.moved() == PREMIUM
        assert money.signatures("/premium") == 1

        # The organisation has paid this payee now: the next payment needs nobody.
        second = structured(await client.call_tool("fetch_paid", {"url": url}))
        assert second["status"] == "paid"
        assert money.moved() == 2 * PREMIUM

    (event,) = _audit(db, setup.org_id, "approval.approved")
    assert event.actor == f"member:{member}"
    assert event.data["memberId"] == member
    assert event.data["via"] == "cli_break_glass"
    assert run_cli(db.url, "audit", "verify", "--org", setup.org_id, "--json").json()["intact"] is True


async def test_a_denied_payment_moves_nothing(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        step_up="0.25",
    )
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    member = make_member(db, setup.org_id, role="admin")
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/report")
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("fetch_paid", {"url": url}))
        assert (held["status"], held["reason"], held["thresholdUsd"], held["amountUsd"]) == (
            "pending_approval",
            "threshold",
            "0.25",
            "0.50",
        )
        viewer = make_member(db, setup.org_id, role="viewer")
        refused = run_cli(
            db.url, "admin", "approvals", "decide", held["approvalId"], "approve", "--member", viewer
        )
        assert refused.exit_code != 0
        assert "forbidden" in refused.stderr
        denied = run_cli(
            db.url, "admin", "approvals", "decide", held["approvalId"], "deny", "--member", member, "--json"
        ).json()
        assert denied["status"] == "denied"
        error = error_of(
            await client.call_tool("fetch_paid", {"url": url, "idempotencyKey": held["idempotencyKey"]})
        )
        assert error["code"] == "approval_denied"
        status = structured(await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]}))
        assert status["status"] == "denied"
        payments = structured(await client.call_tool("list_payments", {}))["payments"]
        assert [p["status"] for p in payments] == ["failed"]
    assert money.moved() == 0
    assert money.signatures("/report") == 0


async def test_an_expired_approval_moves_nothing(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    clock = ShiftedClock()
    with serve(db.url, extra=_extra(anvil, test_usdc), clock=clock) as server:
        setup = make_agent(
            db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        )
        money = Money(test_usdc, seller, funded_wallet.address)
        url = seller.url("/premium")
        async with mcp_client(server.mcp_url, setup.token) as client:
            held = structured(await client.call_tool("fetch_paid", {"url": url}))
            assert held["status"] == "pending_approval"
            clock.advance(15 * 60 + 1)
            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]})
            )
            assert status["status"] == "expired"
            error = error_of(
                await client.call_tool("fetch_paid", {"url": url, "idempotencyKey": held["idempotencyKey"]})
            )
            assert error["code"] == "approval_expired"
    assert money.moved() == 0
    assert money.signatures("/premium") == 0


async def test_a_catalog_host_is_held_once_then_joins_the_allowed_hosts(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["api.example.com"], wallet_key=funded_wallet.private_key
    )
    member = make_member(db, setup.org_id)
    run_cli(db.url, "admin", "policy", "set", setup.agent_id, "--allow-catalog-hosts", "--json").json()
    url = seller.url("/premium")
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        # Not listed yet: not even requested.
        assert error_of(await client.call_tool("fetch_paid", {"url": url}))["code"] == "host_not_allowed"
        listed = run_cli(
            db.url,
            "admin",
            "catalog",
            "add",
            "--name",
            "Local seller",
            "--host",
            "127.0.0.1",
            "--url",
            url,
            "--price",
            "0.01",
            "--network",
            "eip155:84532",
            "--category",
            "testing",
            "--pay-to",
            seller.pay_to,
            "--json",
        ).json()
        assert listed["payToMode"] == "pinned"
        budget = structured(await client.call_tool("get_budget", {}))
        assert budget["catalogHosts"] == ["127.0.0.1"]
        held = structured(await client.call_tool("fetch_paid", {"url": url}))
        assert (held["status"], held["reason"]) == ("pending_approval", "catalog_new_host")
        approved = run_cli(
            db.url,
            "admin",
            "approvals",
            "decide",
            held["approvalId"],
            "approve",
            "--member",
            member,
            "--json",
        ).json()
        assert approved["status"] == "approved"
        paid = structured(
            await client.call_tool("fetch_paid", {"url": url, "idempotencyKey": held["idempotencyKey"]})
        )
        assert paid["status"] == "paid"
        budget = structured(await client.call_tool("get_budget", {}))
        assert budget["allowHosts"] == ["api.example.com", "127.0.0.1"]
        assert budget["catalogHosts"] == []
        assert structured(await client.call_tool("fetch_paid", {"url": url}))["status"] == "paid"
    (added,) = _audit(db, setup.org_id, "policy.catalog_host_added")
    assert added.data["policy"]["allowHosts"] == ["api.example.com", "127.0.0.1"]


async def test_catalog_rules_deny_unlisted_sellers_and_unpinned_payees(
    paywarden: RunningServer, db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    policy = run_cli(
        db.url, "admin", "policy", "set", setup.agent_id, "--verified-sellers-only", "--json"
    ).json()
    assert policy["policy"]["verifiedSellersOnly"] is True
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert (error["code"], error["reasons"]) == ("policy_denied", ["seller_not_verified"])
        pin_payee(db, url=seller.url("/premium"), pay_to="0x" + "3" * 40)
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert (error["code"], error["reasons"]) == ("policy_denied", ["pay_to_not_verified"])


async def test_a_hold_rule_names_itself_and_its_scope(
    paywarden: RunningServer, db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    rule = run_cli(
        db.url,
        "admin",
        "rule",
        "add",
        "--scope",
        "org",
        "--id",
        setup.org_id,
        "--kind",
        "hold",
        "--path-prefix",
        "/report",
        "--json",
    ).json()
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("fetch_paid", {"url": seller.url("/report")}))
        assert (held["status"], held["reason"]) == ("pending_approval", "rule")
        assert held["rules"] == [rule["ruleId"]]
        assert held["ruleScopes"] == {rule["ruleId"]: "org"}
        # The rule's condition does not select /premium.
        assert (
            structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))["status"]
            == "paid"
        )


async def test_the_sixth_hold_of_an_agent_finds_the_queue_full(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    money = Money(test_usdc, seller, funded_wallet.address)
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        for _ in range(5):
            held = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert held["status"] == "pending_approval"
        error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert error["code"] == "approval_queue_full"
    assert money.moved() == 0
    assert money.signatures("/premium") == 0


async def test_instructions_that_first_appear_on_the_retry_need_a_new_approval(
    paywarden: RunningServer, db: Database, hostile_seller: HostileSeller, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        step_up="0.001",
    )
    pin_payee(db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    member = make_member(db, setup.org_id, role="approver")
    path = hostile_seller.path("inject-later")
    url = hostile_seller.url(path)

    def approve(approval_id: str) -> None:
        run_cli(db.url, "admin", "approvals", "decide", approval_id, "approve", "--member", member, "--json")

    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("fetch_paid", {"url": url}))
        assert (held["status"], held["reason"]) == ("pending_approval", "threshold")
        approve(held["approvalId"])
        retry = {"url": url, "idempotencyKey": held["idempotencyKey"]}

        # The 402 now reads like orders to the agent: what the person approved did not say so.
        again = structured(await client.call_tool("fetch_paid", retry))
        assert (again["status"], again["reason"]) == ("pending_approval", "instruction_like_description")
        assert again["approvalId"] != held["approvalId"]
        assert again["idempotencyKey"] == held["idempotencyKey"]
        old = structured(await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]}))
        assert old["status"] == "superseded"
        assert hostile_seller.signatures(path) == 0
        inbox = run_cli(db.url, "admin", "approvals", "list", "--org", setup.org_id, "--json").json()
        listed = {item["approvalId"]: item for item in inbox["approvals"]}
        assert listed[again["approvalId"]]["holdReasons"] == ["instruction_like_description", "threshold"]
        assert listed[held["approvalId"]]["status"] == "superseded"

        approve(again["approvalId"])
        paid = structured(await client.call_tool("fetch_paid", retry))
        assert (paid["status"], paid["replayed"]) == ("paid", False)
        assert hostile_seller.signatures(path) == 1
