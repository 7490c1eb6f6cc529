"""quote_payment against the local seller: the decision and the price, with nothing signed,
reserved or recorded; and fetch_paid's denials by rules beyond the agent, with their scopes."""

from __future__ import annotations

import pytest
from sqlmodel import func, select

from server.kit.db import Database
from server.models import PaymentIntent
from tests.support.chain import TestToken
from tests.support.cli import run_cli
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, error_of, mcp_client, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, make_member, make_team, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


def intents(db: Database) -> int:
    with db.read() as session:
        return int(session.exec(select(func.count()).select_from(PaymentIntent)).one())


async def test_a_quote_decides_without_signing_or_reserving(
    paywarden: RunningServer, db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        max_per_tx="1.00",
        step_up="0.25",
    )
    signatures = seller.payment_signature_counts
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        quote = structured(await client.call_tool("quote_payment", {"url": seller.url("/premium")}))
        assert quote["outcome"] == "would_need_approval"
        assert (quote["reason"], quote["thresholdUsd"]) == ("new_pay_to", None)
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        quote = structured(await client.call_tool("quote_payment", {"url": seller.url("/premium")}))
        assert quote == {
            "outcome": "would_pay",
            "host": "127.0.0.1",
            "policyVersion": quote["policyVersion"],
            "httpStatus": 402,
            "amountUsd": "0.01",
            "network": "eip155:84532",
            "asset": "USDC",
            "payTo": seller.pay_to,
            "walletConfigured": True,
        }
        quote = structured(await client.call_tool("quote_payment", {"url": seller.url("/report")}))
        assert (quote["outcome"], quote["reason"], quote["thresholdUsd"]) == (
            "would_need_approval",
            "threshold",
            "0.25",
        )
        quote = structured(await client.call_tool("quote_payment", {"url": seller.url("/dataset")}))
        assert (quote["outcome"], quote["reasons"]) == ("would_deny", ["amount_exceeds_per_transaction"])
        quote = structured(await client.call_tool("quote_payment", {"url": seller.url("/free")}))
        assert (quote["outcome"], quote["httpStatus"]) == ("no_payment_needed", 200)
        other = seller.url("/premium").replace("127.0.0.1", "localhost")
        quote = structured(await client.call_tool("quote_payment", {"url": other}))
        assert (quote["outcome"], quote["reasons"]) == ("would_deny", ["host_not_allowed"])
        error = error_of(
            await client.call_tool("quote_payment", {"url": seller.url("/premium"), "maxAmountUsd": "0.001"})
        )
        assert error["code"] == "amount_exceeds_max"
        budget = structured(await client.call_tool("get_budget", {}))
        assert budget["spentTodayUsd"] == "0.00"
    assert intents(db) == 0
    assert seller.payment_signature_counts == signatures


async def test_rules_of_the_team_member_and_organisation_deny_with_their_scopes(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    first = make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"])
    team = make_team(db, first.org_id)
    member = make_member(db, first.org_id)
    setup = make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        org_id=first.org_id,
        team_id=team,
        member_id=member,
        name="ruled",
    )
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    url = seller.url("/premium")
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        error = error_of(await client.call_tool("fetch_paid", {"url": url}))
        assert (error["code"], error["reasons"]) == ("policy_denied", ["member_cap_exceeded"])
        assert error["hint"]
        cap = run_cli(
            db.url,
            "admin",
            "rule",
            "add",
            "--scope",
            "member",
            "--id",
            member,
            "--kind",
            "limit",
            "--limit-usd",
            "0.05",
            "--window",
            "day",
            "--json",
        ).json()
        team_rule = run_cli(
            db.url,
            "admin",
            "rule",
            "add",
            "--scope",
            "team",
            "--id",
            team,
            "--kind",
            "limit",
            "--limit-usd",
            "0.01",
            "--window",
            "week",
            "--json",
        ).json()
        assert structured(await client.call_tool("fetch_paid", {"url": url}))["status"] == "paid"
        error = error_of(await client.call_tool("fetch_paid", {"url": url}))
        assert (error["code"], error["reasons"]) == ("policy_denied", ["rule_limit_exceeded"])
        assert error["rules"] == [team_rule["ruleId"]]
        assert error["ruleScopes"] == {team_rule["ruleId"]: "team"}
        assert error["hint"]
        assert team not in str(error)

        run_cli(db.url, "admin", "rule", "set", team_rule["ruleId"], "--limit-usd", "1", "--json").json()
        deny = run_cli(
            db.url,
            "admin",
            "rule",
            "add",
            "--scope",
            "org",
            "--id",
            setup.org_id,
            "--kind",
            "deny",
            "--host",
            "127.0.0.1",
            "--path-prefix",
            "/premium",
            "--json",
        ).json()
        error = error_of(await client.call_tool("fetch_paid", {"url": url}))
        assert (error["reasons"], error["rules"], error["ruleScopes"]) == (
            ["rule_denied"],
            [deny["ruleId"]],
            {deny["ruleId"]: "org"},
        )
        run_cli(db.url, "admin", "rule", "remove", deny["ruleId"], "--json").json()
        assert structured(await client.call_tool("fetch_paid", {"url": url}))["status"] == "paid"
        budget = structured(await client.call_tool("get_budget", {}))
        assert budget["member"]["spentTodayUsd"] == "0.02"
        assert {limit["ruleId"] for limit in budget["scopeLimits"]} == {cap["ruleId"], team_rule["ruleId"]}

    with db.read() as session:
        decisions = [row.decision for row in session.exec(select(PaymentIntent))]
    # Each decision records the versions it used: the team rule was at version 2 for the last one.
    assert sorted(d["versions"]["rules"][team_rule["ruleId"]] for d in decisions) == [1, 2]
