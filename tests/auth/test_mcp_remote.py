"""mcp-remote, the stdio bridge Claude Desktop runs for a remote server, connects to Paywarden by
URL, under either loopback name: it discovers the metadata, registers, and sends the person to
authorize; the person signs in with a passkey and consents in headless Chromium (a virtual
authenticator); `tools/list` and `get_budget` then answer through mcp-remote's stdio."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import anyio
import pytest
from playwright.async_api import Page

from server.kit.db import Database
from tests.support import mcp_remote
from tests.support.browser import Screenshots, VirtualAuthenticator
from tests.support.chain import free_port
from tests.support.oauth import enrollment_link_token
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not mcp_remote.installed(), reason=mcp_remote.MISSING),
]

FLOW_TIMEOUT_S = 120


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


@pytest.mark.parametrize("spelling", ["localhost", "127.0.0.1"])
async def test_mcp_remote_signs_in_and_calls_get_budget(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
    tmp_path: Path,
    spelling: str,
) -> None:
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=["api.example.com"], name="desktop-bot")
    member_id = make_member(sqlite_db, agent.org_id, role="owner")
    token = enrollment_link_token(sqlite_db, member_id, agent.org_id, clock=paywarden.clock)
    origin = paywarden.settings.public_url
    url = f"http://{spelling}:{paywarden.port}/mcp"
    with (
        anyio.fail_after(FLOW_TIMEOUT_S),
        mcp_remote.McpRemote(url, callback_port=free_port(), home=tmp_path / "mcp-remote") as remote,
    ):
        await page.goto(f"{origin}/enroll/{token}")
        await page.get_by_label("Name this passkey").fill("Test laptop")
        await page.get_by_role("button", name="Create a passkey").click()
        await page.wait_for_url("**/admin?welcome=1")

        authorize = await anyio.to_thread.run_sync(remote.authorization_url)
        # Whatever name mcp-remote was given, the person signs in at the one origin.
        assert authorize.startswith(f"{origin}/oauth/authorize?"), authorize
        assert parse_qs(urlsplit(authorize).query)["resource"] == [url]
        await page.goto(authorize)
        await page.get_by_role("heading", name="Connect MCP CLI Proxy?").wait_for()
        await page.get_by_label("desktop-bot").check()
        await screenshots.take(page, f"consent-{spelling}")
        await page.get_by_role("button", name="Allow").click()
        await page.wait_for_url("**/oauth/callback?**")
        await screenshots.take(page, f"back-in-mcp-remote-{spelling}")

        initialized = await anyio.to_thread.run_sync(remote.initialize)
        assert initialized["result"]["serverInfo"]["name"], initialized
        listed = await anyio.to_thread.run_sync(remote.request, 2, "tools/list")
        names = {tool["name"] for tool in listed["result"]["tools"]}
        assert {"get_budget", "fetch_paid", "quote_payment"} <= names, names
        called = await anyio.to_thread.run_sync(
            remote.request, 3, "tools/call", {"name": "get_budget", "arguments": {}}
        )
        result = called["result"]
        assert result.get("isError") is not True, result
        budget = result.get("structuredContent") or json.loads(result["content"][0]["text"])
        assert budget["agentId"] == agent.agent_id
    assert len(await authenticator.credentials()) == 1
