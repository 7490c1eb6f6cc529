"""fetch_paid, quote_payment and diagnose_payment run one preflight: over the same table of real
sellers on loopback, through a running Paywarden and the official MCP client, the three tools stop
at the same first failing step (or all pass), and diagnose_payment lists the steps it ran.

Each row has its own agent; the tools run in the order diagnose, quote, fetch_paid, so a payment
fetch_paid makes cannot change what the other two saw. A quote is the policy's answer: it reports
whether a wallet is configured but never stops at the wallet step, so on the wallet rows it goes
on to the decision.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.policy.rulebook import add_rule
from server.policy.rules import RuleTarget
from server.vocabulary import RuleScope
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.crafted_seller import CraftedSeller, fixture_crafted_seller  # noqa: F401
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.tenants import AgentSetup, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

STEPS = ["context", "host", "request", "offer", "wallet", "facts", "decision"]

# The step each error fetch_paid (or quote_payment) returns belongs to.
STEP_OF_ERROR = {
    "host_not_allowed": "host",
    "seller_unreachable": "request",
    "seller_timeout": "request",
    "invalid_payment_required": "offer",
    "no_payable_entry": "offer",
    "amount_exceeds_max": "offer",
    "resource_mismatch": "offer",
    "wallet_not_configured": "wallet",
    "insufficient_funds": "wallet",
}


@dataclass(frozen=True)
class Row:
    name: str
    scenario: str
    step: str | None  # the first failing step, None: every step passes
    allow_hosts: tuple[str, ...] = ("127.0.0.1",)
    wallet: str = "funded"  # funded, empty or none
    max_per_tx: str = "1.00"
    rule: tuple[str, str] | None = None  # (kind, path prefix) for the agent's organisation
    arguments: dict[str, Any] = field(default_factory=dict)


ROWS = [
    Row("unlisted host", "honest", "host", allow_hosts=("localhost",)),
    Row("path denied before sending", "honest", "request", rule=("deny", "/honest/")),
    Row("bad offer", "no_challenge", "offer"),
    Row("wrong network", "unpayable", "offer"),
    Row("over maxAmountUsd", "honest", "offer", arguments={"maxAmountUsd": "0.001"}),
    Row("another host to pay for", "other_host", "offer"),
    Row("no wallet", "honest", "wallet", wallet="none"),
    Row("no money", "honest", "wallet", wallet="empty"),
    Row("over the per-payment cap", "honest", "decision", max_per_tx="0.001"),
    Row("needs approval", "honest", None, rule=("hold", "/honest/")),
    Row("free", "ok", None),
    Row("good", "honest", None),
]


@pytest.fixture
def paywarden(db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_FETCH_TIMEOUT_MS": "5000",
    }
    with serve(db.url, extra=extra) as server:
        yield server


def agent_for(db: Database, paywarden: RunningServer, row: Row, funded: FundedWallet) -> AgentSetup:
    key = {"funded": funded.private_key, "empty": fresh_wallet()[1], "none": None}[row.wallet]
    agent = make_agent(
        db,
        paywarden.settings,
        allow_hosts=list(row.allow_hosts),
        wallet_key=key,
        max_per_tx=row.max_per_tx,
        name=row.name.replace(" ", "-"),
    )
    if row.rule is not None:
        kind, prefix = row.rule
        with db.write() as session:
            add_rule(
                session,
                target=RuleTarget(RuleScope.ORG, agent.org_id, agent.org_id),
                kind=kind,
                host=None,
                path_prefix=prefix,
                limit_usd=None,
                window=None,
                actor="test",
                now=SystemClock().now(),
            )
    return agent


def first_failed(steps: list[dict[str, Any]]) -> str | None:
    return next((seen["step"] for seen in steps if seen["status"] == "failed"), None)


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    """(is an error, its document or the result)."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        return True, error_of(result)
    return False, structured(result)


def quoted(step: str | None) -> str | None:
    """The step a quote stops at where fetch_paid stops at `step`: the same, but the wallet's."""
    return None if step == "wallet" else step


def quote_step(is_error: bool, quote: dict[str, Any]) -> str | None:
    if is_error:
        return STEP_OF_ERROR.get(quote["code"], str(quote["code"]))
    if quote["outcome"] != "would_deny":
        return None
    if quote.get("httpStatus") is None:  # refused before anything was sent
        return "host" if quote["reasons"] == ["host_not_allowed"] else "request"
    return "decision"


def fetch_step(is_error: bool, answer: dict[str, Any], sent: int) -> str | None:
    if not is_error:
        return None
    if answer["code"] == "policy_denied":
        return "request" if sent == 0 else "decision"
    return STEP_OF_ERROR.get(answer["code"], str(answer["code"]))


async def test_the_three_tools_stop_at_the_same_step(
    paywarden: RunningServer, db: Database, crafted_seller: CraftedSeller, funded_wallet: FundedWallet
) -> None:
    pin_payee(db, url=crafted_seller.url("/"), pay_to=crafted_seller.pay_to)
    seen: dict[str, tuple[str | None, str | None, str | None]] = {}
    answers: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
    for row in ROWS:
        agent = agent_for(db, paywarden, row, funded_wallet)
        path = crafted_seller.path(row.scenario)
        arguments = {"url": crafted_seller.url(path), **row.arguments}
        async with mcp_client(paywarden.mcp_url, agent.token) as client:
            diagnosis_error, diagnosis = await call(client, "diagnose_payment", arguments)
            assert not diagnosis_error, (row.name, diagnosis)
            quote_error, quote = await call(client, "quote_payment", arguments)
            before = crafted_seller.requests(path)
            fetch_error, answer = await call(client, "fetch_paid", arguments)
            sent = crafted_seller.requests(path) - before
        assert [seen["step"] for seen in diagnosis["steps"]] == STEPS, row.name
        seen[row.name] = (
            first_failed(diagnosis["steps"]),
            quote_step(quote_error, quote),
            fetch_step(fetch_error, answer, sent),
        )
        answers[row.name] = (diagnosis, quote, answer)
        # What the diagnosis names as fetch_paid's error is the error fetch_paid returned.
        cause = diagnosis["cause"]
        told = cause["fetchPaidError"] if cause else None
        assert told == (answer["code"] if fetch_error else None), (row.name, cause, answer)

    assert {row.step for row in ROWS} - {None} == set(STEPS) - {"context", "facts"}
    assert seen == {row.name: (row.step, quoted(row.step), row.step) for row in ROWS}

    # A quote reports the wallet it would pay with, without stopping at it.
    assert answers["no wallet"][1]["walletConfigured"] is False
    assert answers["no money"][1]["walletConfigured"] is True
    # Every step, as the preflight saw it, for a payment that passed, a free URL and a refusal.
    statuses = {name: [seen["status"] for seen in answers[name][0]["steps"]] for name in answers}
    assert statuses["good"] == ["passed"] * 7
    assert statuses["free"] == ["passed", "passed", "passed"] + ["not_needed"] * 4
    assert statuses["unlisted host"] == ["passed", "failed"] + ["not_reached"] * 5
    assert statuses["no money"] == ["passed"] * 4 + ["failed", "not_reached", "not_reached"]
    assert answers["no money"][0]["steps"][4]["code"] == "insufficient_funds"
    # fetch_paid really paid the good seller and held the payment a rule holds.
    assert answers["good"][2]["status"] == "paid"
    assert answers["needs approval"][2]["status"] == "pending_approval"
    assert answers["needs approval"][1]["outcome"] == "would_need_approval"
    assert answers["free"][1]["outcome"] == "no_payment_needed"
