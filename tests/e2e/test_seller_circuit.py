"""The seller circuit breaker, end to end: a real MCP client, a running Paywarden, the hostile
seller taking signed payments and delivering nothing, real authorisations on anvil.

At the organisation's threshold the host's circuit opens; the next fetch_paid and quote_payment are
denied with `seller_circuit_open` before anything is sent; another organisation is unaffected; no
agent token clears it; a member does (the admin API), and the next call pays.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlmodel import col, select

from auth.principal import Principal
from auth.scopes import Scope
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent
from server.payments.circuits import clear_circuit
from tests.support.admin_api import admin_token, call, problem
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import HostileSeller, fixture_hostile_seller  # noqa: F401
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.tenants import AgentSetup, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

HOST = "127.0.0.1"


@pytest.fixture(name="db")
def fixture_db(module_sqlite_db: Database) -> Database:
    return module_sqlite_db


@pytest.fixture(scope="module")
def paywarden(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, hostile_seller: HostileSeller
) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        # A first answer slower than this is `seller_timeout` before anything is signed: under a
        # loaded CI machine the hostile seller's 402 took more than 3 s.
        "PAYWARDEN_FETCH_TIMEOUT_MS": "15000",
    }
    pin_payee(module_sqlite_db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    with serve(module_sqlite_db.url, extra=extra) as server:
        yield server


def agent_of(paywarden: RunningServer, db: Database, key: str | None) -> AgentSetup:
    return make_agent(db, paywarden.settings, allow_hosts=[HOST], wallet_key=key, daily_cap="5.00")


def open_circuits(budget: dict[str, Any]) -> list[str]:
    return [circuit["host"] for circuit in budget["openCircuits"]]


def intents_to(db: Database, agent: AgentSetup) -> list[PaymentIntent]:
    with db.read() as session:
        return list(session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent.agent_id)))


async def test_undelivered_payments_open_the_circuit_and_only_a_member_clears_it(
    paywarden: RunningServer, db: Database, funded_wallet: FundedWallet, hostile_seller: HostileSeller
) -> None:
    agent = agent_of(paywarden, db, funded_wallet.private_key)
    other = agent_of(paywarden, db, fresh_wallet()[1])  # another organisation
    async with mcp_client(paywarden.mcp_url, agent.token) as client:
        # Two paid calls that deliver nothing: below the default threshold of three.
        for _ in range(2):
            path = hostile_seller.path("error500")
            error = error_of(await client.call_tool("fetch_paid", {"url": hostile_seller.url(path)}))
            assert error["code"] == "payment_not_completed"
            assert hostile_seller.signatures(path) == 1
        assert open_circuits(structured(await client.call_tool("get_budget", {}))) == []

        path = hostile_seller.path("error500")
        error_of(await client.call_tool("fetch_paid", {"url": hostile_seller.url(path)}))
        budget = structured(await client.call_tool("get_budget", {}))
        assert open_circuits(budget) == [HOST]
        assert budget["openCircuits"][0]["failures"] == 3

        # Open: denied before anything is sent or signed, by fetch_paid and by a quote alike.
        honest = hostile_seller.path("honest")
        before = len(intents_to(db, agent))
        denied = error_of(await client.call_tool("fetch_paid", {"url": hostile_seller.url(honest)}))
        assert denied["code"] == "policy_denied"
        assert denied["reasons"] == ["seller_circuit_open"]
        quoted = error_of(await client.call_tool("quote_payment", {"url": hostile_seller.url(honest)}))
        assert (quoted["code"], quoted["reasons"]) == ("policy_denied", ["seller_circuit_open"])
        # The diagnosis names the same step and error.
        diagnosis = structured(
            await client.call_tool("diagnose_payment", {"url": hostile_seller.url(honest)})
        )
        failed = [(step["step"], step["code"]) for step in diagnosis["steps"] if step["status"] == "failed"]
        assert failed == [("host", "policy_denied")]
        assert diagnosis["cause"]["fetchPaidError"] == "policy_denied"
        assert diagnosis["cause"]["reasons"] == ["seller_circuit_open"]
        assert hostile_seller.requests(honest) == 0
        assert hostile_seller.signatures(honest) == 0
        assert len(intents_to(db, agent)) == before

    # Another organisation still reaches the seller.
    async with mcp_client(paywarden.mcp_url, other.token) as other_client:
        assert open_circuits(structured(await other_client.call_tool("get_budget", {}))) == []
        quote = structured(await other_client.call_tool("quote_payment", {"url": hostile_seller.url(honest)}))
        assert quote["outcome"] != "would_deny"

    # No agent token clears it; a member's admin token does.
    agent_token = admin_token(
        db, paywarden, agent.org_id, frozenset({Scope.PAYMENTS_WRITE}), agent_id=agent.agent_id
    )
    for token in (agent.token, agent_token):
        refused = call(paywarden, "delete", f"/circuits/{HOST}", token)
        assert refused.status_code in (401, 403), refused.text
    member = admin_token(db, paywarden, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    listed = call(paywarden, "get", "/circuits", member)
    assert [row["host"] for row in listed.json()["circuits"]] == [HOST]
    # Clearing lets the agents pay the seller again: not with a token, only after a passkey.
    problem(call(paywarden, "delete", f"/circuits/{HOST}", member), 403, "sudo_required")
    with db.write() as session:  # what the dashboard does once the member confirmed (its own test)
        clear_circuit(
            session,
            Principal.for_member(org_id=agent.org_id, member_id="mem_x"),
            host=HOST,
            now=SystemClock().now(),
        )
    with db.read() as session:
        kinds = session.exec(
            select(AuditEvent.type).where(
                AuditEvent.org_id == agent.org_id, col(AuditEvent.type).startswith("seller_circuit.")
            )
        ).all()
    assert sorted(kinds) == ["seller_circuit.cleared", "seller_circuit.opened"]

    async with mcp_client(paywarden.mcp_url, agent.token) as client:
        paid = structured(await client.call_tool("fetch_paid", {"url": hostile_seller.url(honest)}))
        assert paid["status"] == "paid"
        assert hostile_seller.signatures(honest) == 1
        # The failures before the clearing no longer count: one more does not reopen it.
        error_of(
            await client.call_tool("fetch_paid", {"url": hostile_seller.url(hostile_seller.path("error500"))})
        )
        assert open_circuits(structured(await client.call_tool("get_budget", {}))) == []


async def test_the_threshold_is_the_organisations_setting(
    paywarden: RunningServer, db: Database, funded_wallet: FundedWallet, hostile_seller: HostileSeller
) -> None:
    agent = agent_of(paywarden, db, funded_wallet.private_key)
    member = admin_token(db, paywarden, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    refused = call(paywarden, "patch", "/organization", member, body={"circuitFailures": 0})
    assert problem(refused, 400, "invalid_input")["detail"].endswith("Reason: invalid_circuit_threshold.")
    changed = call(paywarden, "patch", "/organization", member, body={"circuitFailures": 1})
    assert changed.status_code == 200, changed.text
    assert (changed.json()["circuitFailures"], changed.json()["circuitWindowHours"]) == (1, 24)
    # Loosening the breaker lets more undelivered calls through: a token alone cannot.
    for loosened in ({"circuitFailures": 5}, {"circuitWindowHours": 2}):
        problem(call(paywarden, "patch", "/organization", member, body=loosened), 403, "sudo_required")
    async with mcp_client(paywarden.mcp_url, agent.token) as client:
        assert open_circuits(structured(await client.call_tool("get_budget", {}))) == []
        path = hostile_seller.path("drop")  # the answer lost after the signature: not counted yet
        assert error_of(await client.call_tool("fetch_paid", {"url": hostile_seller.url(path)}))["code"] == (
            "payment_outcome_unknown"
        )
        assert open_circuits(structured(await client.call_tool("get_budget", {}))) == []
        path = hostile_seller.path("error500")
        error_of(await client.call_tool("fetch_paid", {"url": hostile_seller.url(path)}))
        assert open_circuits(structured(await client.call_tool("get_budget", {}))) == [HOST]
