"""search_paid_apis over real MCP (HTTP, the official client), on both databases: the scope it
needs, the reference's fields, and a seller's self-description only ever in a fenced block."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from auth.scopes import Scope
from server.kit.db import Database
from tests.support.catalog import list_seller
from tests.support.hostile_seller import CANARY, INJECTION
from tests.support.paywarden import RunningServer, error_of, mcp_client, serve, structured
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio

PAYEE = "0x" + "11" * 20
NOW = datetime.now(UTC)


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url) as running:
        yield running


def sellers(db: Database) -> None:
    list_seller(
        db,
        host="search.example.com",
        name="Web Search",
        category="search",
        summary="Ranked web results for a query.",
        now=NOW,
        verified_at=NOW - timedelta(hours=1),
        offers=[("eip155:84532", "0.01", PAYEE), ("eip155:8453", "0.008", PAYEE)],
        pinned=[PAYEE],
        seller_description=f"The best search. {INJECTION}",
    )
    list_seller(
        db,
        host="news.example.com",
        name="News Search",
        category="search",
        summary="Searches today's news.",
        now=NOW,
        verified_at=NOW - timedelta(hours=2),
        offers=[("eip155:84532", "0.02", PAYEE)],
    )


async def test_search_paid_apis_answers_with_policy_checked_results(
    server: RunningServer, db: Database
) -> None:
    sellers(db)
    setup = make_agent(db, server.settings, allow_hosts=["search.example.com"])
    async with mcp_client(server.mcp_url, setup.token) as client:
        result = await client.call_tool("search_paid_apis", {"query": "find me a web search API I can pay"})
    document = structured(result)
    assert (document["agentId"], document["query"], document["total"]) == (
        setup.agent_id,
        "find me a web search API I can pay",
        2,
    )
    first, second = document["results"]
    assert first == {
        "id": first["id"],
        "name": "Web Search",
        "host": "search.example.com",
        "category": "search",
        "summary": "Ranked web results for a query.",
        "url": "https://search.example.com/v1/search",
        "method": "GET",
        "exampleBody": None,
        "priceUsd": "0.01",  # on the agent's network, though Base is cheaper
        "network": "eip155:84532",
        "testnet": True,
        "verifiedAt": first["verifiedAt"],
        "payToMode": "pinned",
        "reliability": {"sample": "insufficient", "successRate": None},
        "allowedByPolicy": True,
        "requiresApproval": False,
        "policyBlockers": [],
        "sellerDescription": {"untrusted": True},
    }
    assert datetime.fromisoformat(first["verifiedAt"]) > NOW - timedelta(hours=2)
    assert (second["host"], second["allowedByPolicy"], second["policyBlockers"]) == (
        "news.example.com",
        False,
        ["host_not_allowed"],
    )
    assert second["payToMode"] == "rotating"
    assert second["sellerDescription"] is None

    # The seller's words only in their own fenced, labelled block; never in the metadata.
    texts = [block.text for block in result.content if block.type == "text"]
    assert CANARY not in texts[0]
    (fenced,) = [text for text in texts[1:] if CANARY in text]
    assert fenced.startswith("UNTRUSTED THIRD-PARTY CONTENT")
    assert "search.example.com" in fenced
    assert CANARY not in str(document)


async def test_search_paid_apis_needs_catalog_read_and_valid_input(
    server: RunningServer, db: Database
) -> None:
    sellers(db)
    without = make_agent(db, server.settings, allow_hosts=[], scopes=frozenset({Scope.PAYMENTS_READ}))
    async with mcp_client(server.mcp_url, without.token) as client:
        error = error_of(await client.call_tool("search_paid_apis", {"query": "search"}))
        assert (error["code"], error["scope"]) == ("insufficient_scope", "catalog:read")
        error = error_of(await client.call_tool("diagnose_payment", {"url": "https://search.example.com/v1"}))
        assert (error["code"], error["scope"]) == ("insufficient_scope", "catalog:read")
    setup = make_agent(db, server.settings, allow_hosts=[], scopes=frozenset({Scope.CATALOG_READ}))
    async with mcp_client(server.mcp_url, setup.token) as client:
        error = error_of(await client.call_tool("search_paid_apis", {"query": "search", "limit": 50}))
        assert (error["code"], error["reason"]) == ("invalid_input", "invalid_limit")
        error = error_of(
            await client.call_tool("search_paid_apis", {"query": "search", "network": "eip155:1"})
        )
        assert (error["code"], error["reason"]) == ("invalid_input", "invalid_network")
        found = structured(
            await client.call_tool(
                "search_paid_apis", {"query": "search", "network": "eip155:8453", "limit": 1}
            )
        )
        assert [(r["host"], r["priceUsd"], r["network"]) for r in found["results"]] == [
            ("search.example.com", "0.008", "eip155:8453")
        ]
        assert found["total"] == 1
