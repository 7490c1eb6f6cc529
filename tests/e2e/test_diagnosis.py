"""diagnose_payment and search_paid_apis against real sellers, through a running Paywarden and the
official MCP client: the cause diagnose_payment reports is the error fetch_paid then really
returns, rules and chat rules show where they bind, nothing is ever signed or paid, no seller
text comes back; and search judges a seller exactly as quote_payment judges its URL."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from mcp import Client

from server.catalog.service import add_entry
from server.catalog.verification import CatalogVerifier, CheckOutcome
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.policy.service import PolicyChanges
from server.sellers.client import SellerClient
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import CANARY, HostileSeller, fixture_hostile_seller  # noqa: F401
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import change_policy, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


@pytest.fixture
def paywarden(db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_FETCH_TIMEOUT_MS": "5000",
    }
    with serve(db.url, extra=extra) as server:
        yield server


async def diagnose(client: Client, url: str, **extra: Any) -> dict[str, Any]:
    result = await client.call_tool("diagnose_payment", {"url": url, **extra})
    assert all(CANARY not in block.text for block in result.content if block.type == "text")
    return structured(result)


async def fetch_error(client: Client, url: str) -> dict[str, Any]:
    return error_of(await client.call_tool("fetch_paid", {"url": url}))


async def test_the_cause_is_the_error_fetch_paid_then_returns(
    paywarden: RunningServer, db: Database, hostile_seller: HostileSeller, funded_wallet: FundedWallet
) -> None:
    # A host the agent may not pay: nothing is even sent.
    elsewhere = make_agent(db, paywarden.settings, allow_hosts=["localhost"], name="elsewhere")
    path = hostile_seller.path("honest")
    async with mcp_client(paywarden.mcp_url, elsewhere.token) as client:
        found = await diagnose(client, hostile_seller.url(path) + "?secret=1")
        assert found["status"] == "problem"
        assert found["cause"] == {
            "code": "host_not_allowed",
            "reasons": [],
            "fetchPaidError": "host_not_allowed",
        }
        assert found["request"] == {
            "method": "GET",
            "url": hostile_seller.url(path),
            "httpStatus": None,
            "x402Version": None,
        }
        assert "secret" not in found["issueReport"]
        assert hostile_seller.requests(path) == 0
        assert (await fetch_error(client, hostile_seller.url(path)))["code"] == "host_not_allowed"

    # No wallet: the challenge is fine, the agent cannot sign.
    walletless = make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"], name="walletless")
    async with mcp_client(paywarden.mcp_url, walletless.token) as client:
        found = await diagnose(client, hostile_seller.url(path))
        assert found["cause"]["code"] == "wallet_not_configured"
        assert found["request"]["httpStatus"] == 402
        assert found["request"]["x402Version"] == 2
        assert [accept["payable"] for accept in found["accepts"]] == [True]
        assert found["accepts"][0]["payTo"] == hostile_seller.pay_to
        assert found["accepts"][0]["amountUsd"] == "0.01"
        assert found["resourceHost"] == "127.0.0.1"
        assert (await fetch_error(client, hostile_seller.url(path)))["code"] == "wallet_not_configured"

    # A wallet with no money on the network.
    empty_address, empty_key = fresh_wallet()
    broke = make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=empty_key, name="broke")
    async with mcp_client(paywarden.mcp_url, broke.token) as client:
        found = await diagnose(client, hostile_seller.url(path))
        assert found["cause"]["code"] == "insufficient_funds"
        assert found["wallet"] == {
            "address": empty_address,
            "source": "agent",
            "network": "eip155:84532",
            "balanceUsdc": "0.00",
            "amountUsdc": "0.01",
            "rpcHost": "127.0.0.1",
        }
        assert f"{empty_address[:6]}…{empty_address[-4:]}" in found["issueReport"]
        assert empty_address not in found["issueReport"]
        assert (await fetch_error(client, hostile_seller.url(path)))["code"] == "insufficient_funds"

    # The policy: a per-payment maximum, then a chat rule that leaves less than the price.
    payer = make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        max_per_tx="0.001",
    )
    async with mcp_client(paywarden.mcp_url, payer.token) as client:
        found = await diagnose(client, hostile_seller.url(path))
        assert found["cause"] == {
            "code": "policy_denied",
            "reasons": ["amount_exceeds_per_transaction"],
            "fetchPaidError": "policy_denied",
        }
        assert found["wallet"]["balanceUsdc"] == "10.00"
        denied = await fetch_error(client, hostile_seller.url(path))
        assert (denied["code"], denied["reasons"]) == ("policy_denied", ["amount_exceeds_per_transaction"])

        change_policy(db, payer.agent_id, PolicyChanges(max_usd_per_tx=Decimal("1")))
        rule = structured(
            await client.call_tool(
                "propose_rule", {"kind": "limit", "limitUsd": "0.005", "window": "day", "host": "127.0.0.1"}
            )
        )
        found = await diagnose(client, hostile_seller.url(path))
        assert found["cause"]["reasons"] == ["rule_limit_exceeded"]
        assert found["ruleBlocks"] == [
            {
                "ruleId": rule["ruleId"],
                "scope": "agent",
                "window": "day",
                "limitUsd": "0.005",
                "leavesUsd": "0.005",
                "resetsAt": found["ruleBlocks"][0]["resetsAt"],
            }
        ]
        assert [(r["ruleId"], r["kind"], r["host"], r["limitUsd"]) for r in found["chatRules"]] == [
            (rule["ruleId"], "limit", "127.0.0.1", "0.005")
        ]
        assert (await fetch_error(client, hostile_seller.url(path)))["reasons"] == ["rule_limit_exceeded"]
    assert hostile_seller.signatures(path) == 0  # nothing was ever signed, by diagnose or by the refusals


async def test_no_problem_found_says_when_a_person_must_approve(
    paywarden: RunningServer, db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    before = seller.payment_signature_counts
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        found = await diagnose(client, seller.url("/premium"))
        assert (found["status"], found["cause"], found["warnings"]) == ("no_problem_found", None, [])
        assert "new_pay_to" in found["summary"]
        assert (found["ruleBlocks"], found["chatRules"]) == ([], [])
        capped = await diagnose(client, seller.url("/premium"), maxAmountUsd="0.001")
        assert capped["cause"] == {
            "code": "amount_exceeds_max",
            "reasons": [],
            "fetchPaidError": "amount_exceeds_max",
        }
        assert "0.001" in capped["explanation"]
        refused = error_of(
            await client.call_tool("fetch_paid", {"url": seller.url("/premium"), "maxAmountUsd": "0.001"})
        )
        assert refused["code"] == "amount_exceeds_max"
        free = await diagnose(client, seller.url("/free"))
        assert (free["status"], free["request"]["httpStatus"], free["accepts"]) == (
            "no_problem_found",
            200,
            [],
        )
        change_policy(db, setup.agent_id, PolicyChanges(verified_sellers_only=True))
        found = await diagnose(client, seller.url("/premium"))
        assert found["cause"]["reasons"] == ["seller_not_verified"]
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        found = await diagnose(client, seller.url("/premium"))
        assert found["status"] == "no_problem_found"
        assert found["summary"].endswith("fetch_paid would pay it now.")
        paid = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        assert paid["status"] == "paid"  # the diagnosis was right: a real attempt pays
    assert seller.payment_signatures("/premium") == before.get("/premium", 0) + 1  # only fetch_paid's


async def test_search_judges_a_seller_as_quote_payment_judges_its_url(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with db.write() as session:
        entry_id = add_entry(
            session,
            name="Premium Reports",
            host="127.0.0.1",
            url=seller.url("/report"),
            price_usd=Decimal("0.01"),
            network="eip155:84532",
            category="testing",
            pay_to=[seller.pay_to],
            actor="test",
            now=SystemClock().now(),
            summary="Premium test reports.",
        ).id
    verifier = CatalogVerifier(
        db=db,
        sellers=SellerClient(max_response_bytes=1_048_576, allow_private_hosts=True),
        usdc_by_network={"eip155:84532": test_usdc.address},
        timeout_ms=5000,
        clock=SystemClock(),
    )
    assert (await verifier.verify([entry_id]))[0].outcome == CheckOutcome.VERIFIED
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    policies = [
        PolicyChanges(),  # would pay: the payee is pinned
        PolicyChanges(step_up_threshold_usd=Decimal("0.10")),  # a person must approve 0.50
        PolicyChanges(max_usd_per_tx=Decimal("0.10")),  # denied
        PolicyChanges(  # allowed only as a listed catalog host: its first payment waits for a person
            allow_hosts=(), allow_catalog_hosts=True, step_up_threshold_usd=None, max_usd_per_tx=Decimal("1")
        ),
    ]
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        seen = []
        for changes in policies:
            change_policy(db, setup.agent_id, changes)
            quote = structured(await client.call_tool("quote_payment", {"url": seller.url("/report")}))
            (found,) = structured(await client.call_tool("search_paid_apis", {"query": "premium reports"}))[
                "results"
            ]
            assert found["priceUsd"] == quote["amountUsd"] == "0.50"
            expected = {
                "would_pay": (True, False, []),
                "would_need_approval": (True, True, []),
                "would_deny": (False, False, quote.get("reasons", [])),
            }[quote["outcome"]]
            assert (found["allowedByPolicy"], found["requiresApproval"], found["policyBlockers"]) == expected
            seen.append((quote["outcome"], quote.get("reason")))
    assert seen == [
        ("would_pay", None),
        ("would_need_approval", "threshold"),
        ("would_deny", None),
        ("would_need_approval", "catalog_new_host"),
    ]
