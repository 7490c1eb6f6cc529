"""The policy judges the request the seller serves and charges for, end to end: a real MCP client, a
running Paywarden, the hostile seller on loopback counting every request per path, real payments
on anvil.

A path spelled with dot segments or escapes is judged as the seller reads it; a same-origin
redirect before the 402 is judged before it is requested; the path that answered the 402 is the one
recorded, counted by limit rules, held by hold rules and paid.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from decimal import Decimal
from typing import Any

import pytest
from mcp import Client
from sqlmodel import select

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import Approval, AuditEvent, PaymentIntent
from server.policy.model import ChallengeRules
from server.policy.rulebook import add_rule
from server.policy.rules import RuleTarget
from server.policy.service import PolicyChanges
from server.vocabulary import RuleScope
from tests.support.chain import Anvil, TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import HostileSeller, fixture_hostile_seller  # noqa: F401
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.tenants import AgentSetup, change_policy, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


# SQL is not what these tests are about: they share one SQLite database and one server per module,
# and each test keeps to its own organisation and agent (docs/development.md, "Sharing a server").
@pytest.fixture(name="db")
def fixture_db(module_sqlite_db: Database) -> Database:
    return module_sqlite_db


@pytest.fixture(scope="module")
def paywarden(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, hostile_seller: HostileSeller
) -> Iterator[RunningServer]:
    extra = {**chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)}
    pin_payee(module_sqlite_db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    with serve(module_sqlite_db.url, extra=extra) as server:
        yield server


@pytest.fixture
def agent(
    paywarden: RunningServer, db: Database, funded_wallet: FundedWallet, hostile_seller: HostileSeller
) -> AgentSetup:
    return make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key)


@pytest.fixture
async def client(paywarden: RunningServer, agent: AgentSetup) -> AsyncIterator[Client]:
    async with mcp_client(paywarden.mcp_url, agent.token) as connected:
        yield connected


def rule(db: Database, agent: AgentSetup, kind: str, path_prefix: str, limit_usd: str | None = None) -> str:
    with db.write() as session:
        return add_rule(
            session,
            target=RuleTarget(RuleScope.ORG, agent.org_id, agent.org_id),
            kind=kind,
            host=None,
            path_prefix=path_prefix,
            limit_usd=None if limit_usd is None else Decimal(limit_usd),
            window="day" if limit_usd is not None else None,
            actor="test",
            now=SystemClock().now(),
        ).id


def honest_of(path: str) -> str:
    """Where the hostile seller's /hop/<id> redirects to: its paid route /honest/<id>."""
    return "/honest/" + path.rsplit("/", 1)[-1]


def intents_of(db: Database, agent: AgentSetup) -> list[PaymentIntent]:
    with db.read() as session:
        return list(session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent.agent_id)))


async def fetch(client: Client, url: str, **arguments: Any) -> Any:
    return await client.call_tool("fetch_paid", {"url": url, **arguments})


@pytest.mark.parametrize(
    "spelling",
    [
        "/free/../honest/{id}",  # dot segments: the seller serves /honest/{id}
        "/%68onest/{id}",  # an escaped letter: the seller serves /honest/{id}
        "/honest/./{id}",
        "/HONEST/../honest/{id}",
    ],
)
async def test_a_deny_rule_sees_the_path_the_seller_would_serve(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, spelling: str
) -> None:
    denied = rule(db, agent, "deny", "/honest/")
    paid_path = hostile_seller.path("honest")
    url = hostile_seller.base_url + spelling.format(id=paid_path.rsplit("/", 1)[-1])
    error = error_of(await fetch(client, url))
    assert (error["code"], error["reasons"], error["rules"]) == ("policy_denied", ["rule_denied"], [denied])
    # Refused before anything was sent, so the seller never saw it, let alone a payment.
    assert hostile_seller.requests(paid_path) == 0
    assert hostile_seller.signatures(paid_path) == 0
    assert intents_of(db, agent) == []
    with db.read() as session:
        (event,) = session.exec(
            select(AuditEvent).where(AuditEvent.org_id == agent.org_id, AuditEvent.type == "payment.denied")
        )
    assert (event.data["stage"], event.data["path"]) == ("before_request", paid_path)

    quote = structured(await client.call_tool("quote_payment", {"url": url}))
    assert (quote["outcome"], quote["reasons"], quote["rules"]) == ("would_deny", ["rule_denied"], [denied])
    assert hostile_seller.requests(paid_path) == 0


async def test_a_redirect_hop_is_judged_before_it_is_requested(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    denied = rule(db, agent, "deny", "/honest/")
    hop = hostile_seller.path("hop")
    error = error_of(await fetch(client, hostile_seller.url(hop)))
    assert (error["code"], error["reasons"], error["rules"]) == ("policy_denied", ["rule_denied"], [denied])
    assert hostile_seller.requests(hop) == 1
    assert hostile_seller.requests(honest_of(hop)) == 0  # the denied hop was never requested
    assert intents_of(db, agent) == []

    quoted = hostile_seller.path("hop")
    quote = structured(await client.call_tool("quote_payment", {"url": hostile_seller.url(quoted)}))
    assert (quote["outcome"], quote["reasons"]) == ("would_deny", ["rule_denied"])
    assert hostile_seller.requests(honest_of(quoted)) == 0


async def test_a_challenge_path_allowlist_applies_to_every_hop(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    change_policy(db, agent.agent_id, PolicyChanges(challenge=ChallengeRules(path_prefixes=("/hop/",))))
    hop = hostile_seller.path("hop")
    error = error_of(await fetch(client, hostile_seller.url(hop)))
    assert (error["code"], error["reasons"]) == ("policy_denied", ["challenge_path_not_allowed"])
    assert hostile_seller.requests(honest_of(hop)) == 0
    assert hostile_seller.signatures(honest_of(hop)) == 0


async def test_the_path_that_asked_is_recorded_counted_and_paid(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    limit = rule(db, agent, "limit", "/honest/", limit_usd="0.01")
    hop = hostile_seller.path("hop")
    paid = structured(await fetch(client, hostile_seller.url(hop)))
    assert paid["status"] == "paid"
    assert hostile_seller.signatures(honest_of(hop)) == 1
    assert hostile_seller.signatures(hop) == 0
    (row,) = intents_of(db, agent)
    assert (row.path, row.resource) == (honest_of(hop), hostile_seller.url(honest_of(hop)))
    assert row.decision["viaPaths"] == [hop]

    # The limit on /honest/ counted that payment, though the agent asked for /hop/.
    direct = hostile_seller.path("honest")
    error = error_of(await fetch(client, hostile_seller.url(direct)))
    assert (error["code"], error["reasons"], error["rules"]) == (
        "policy_denied",
        ["rule_limit_exceeded"],
        [limit],
    )
    assert hostile_seller.signatures(direct) == 0


async def test_a_hold_rule_holds_the_path_reached_by_a_redirect(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    held_by = rule(db, agent, "hold", "/honest/")
    hop = hostile_seller.path("hop")
    held = structured(await fetch(client, hostile_seller.url(hop)))
    assert (held["status"], held["reason"], held["rules"]) == ("pending_approval", "rule", [held_by])
    assert hostile_seller.signatures(honest_of(hop)) == 0
    with db.read() as session:
        approval = session.get(Approval, held["approvalId"])
        assert approval is not None
        # What a person will see and approve: the resource that asked for payment.
        assert approval.resource == hostile_seller.url(honest_of(hop))

    # A hold rule on the path the agent asked for holds the payment made after its redirect too.
    via = hostile_seller.path("hop")
    rule(db, agent, "hold", "/hop/")
    held = structured(await fetch(client, hostile_seller.url(via)))
    assert held["status"] == "pending_approval"
    assert hostile_seller.signatures(honest_of(via)) == 0


async def test_one_spelling_of_the_host_is_judged_and_dialled(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    # Allowed as 127.0.0.1, asked for in a spelling only a resolver library would read that way.
    port = hostile_seller.server.port
    path = hostile_seller.path("honest")
    paid = structured(await fetch(client, f"http://0x7f.1:{port}{path}"))
    assert (paid["status"], paid["host"]) == ("paid", "127.0.0.1")
    assert hostile_seller.signatures(path) == 1


async def test_an_ambiguous_spelling_is_refused_before_anything_is_sent(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    for spelling, problem in (
        ("/honest%2F{id}", "encoded_slash"),
        ("/x/%2e%2e/honest/{id}", "encoded_dot"),
        ("/honest/{id};x", "path_parameter"),
        ("/%2568onest/{id}", "double_encoding"),
        ("//honest/{id}", "empty_segment"),
        ("/honest/{id}%00", "nul"),
    ):
        path = hostile_seller.path("honest")
        url = hostile_seller.base_url + spelling.format(id=path.rsplit("/", 1)[-1])
        error = error_of(await fetch(client, url))
        assert (error["code"], error["reason"], error["urlProblem"]) == (
            "invalid_input",
            "invalid_url",
            problem,
        )
        assert hostile_seller.requests(path) == 0
    assert intents_of(db, agent) == []
