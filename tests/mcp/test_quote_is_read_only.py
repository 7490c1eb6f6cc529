"""quote_payment is read-only in fact: with a token that may only read, it sends nothing but GET or
HEAD, and any other method is refused before a byte leaves Paywarden (a seller counts requests)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest

from auth.scopes import Scope
from server.kit.db import Database
from tests.support.hostile_seller import Exchange, ScriptedServer
from tests.support.paywarden import RunningServer, error_of, mcp_client, serve, structured
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio


class CountingSeller:
    def __init__(self) -> None:
        self.methods: Counter[str] = Counter()
        self._lock = threading.Lock()

    async def handle(self, ex: Exchange) -> None:
        with self._lock:
            self.methods[ex.method] += 1
        await ex.respond(200, b"{}")

    def total(self) -> int:
        with self._lock:
            return sum(self.methods.values())


@pytest.fixture
def seller() -> Iterator[tuple[CountingSeller, ScriptedServer]]:
    counting = CountingSeller()
    server = ScriptedServer(counting.handle).start()
    try:
        yield counting, server
    finally:
        server.stop()


@pytest.fixture
def paywarden(db: Database) -> Iterator[RunningServer]:
    with serve(db.url) as running:
        yield running


async def test_a_quote_sends_only_get_or_head(
    paywarden: RunningServer, db: Database, seller: tuple[CountingSeller, ScriptedServer]
) -> None:
    counting, server = seller
    setup = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], scopes=frozenset({Scope.PAYMENTS_READ})
    )
    url = f"http://127.0.0.1:{server.port}/resource"
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["quote_payment"].input_schema["properties"]["method"]["enum"] == ["GET", "HEAD"]

        for method in ("POST", "PUT", "PATCH", "DELETE", "delete", "TRACE", "OPTIONS"):
            arguments = {"url": url, "method": method}
            if method.upper() in ("POST", "PUT", "PATCH"):
                arguments["body"] = "drop everything"
            error = error_of(await client.call_tool("quote_payment", arguments))
            assert (error["code"], error["reason"]) == ("invalid_input", "method_not_quotable"), method
            assert "GET or HEAD" in error["message"]
        assert counting.total() == 0  # nothing left Paywarden

        for method in ("GET", "HEAD", "get"):
            quote = structured(await client.call_tool("quote_payment", {"url": url, "method": method}))
            assert (quote["outcome"], quote["httpStatus"]) == ("no_payment_needed", 200)
        error = error_of(await client.call_tool("quote_payment", {"url": url, "body": "text"}))
        assert (error["code"], error["reason"]) == ("invalid_input", "body_not_allowed")
        # The token cannot pay at all: fetch_paid needs payments:write.
        error = error_of(await client.call_tool("fetch_paid", {"url": url, "method": "DELETE"}))
        assert error["code"] == "insufficient_scope"
    assert dict(counting.methods) == {"GET": 2, "HEAD": 1}
