"""A real MCP client connects by URL alone: the official `mcp` SDK client with its OAuth client
provider is given only `<PUBLIC_URL>/mcp`. It discovers the metadata, registers, and sends the
person to authorize; the person signs in with a passkey and consents in headless Chromium (with a
virtual authenticator); the client then calls tools. A second test steps up: a token granted only
`payments:read` meets a 403 on `fetch_paid`, and the SDK asks the person again."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from playwright.async_api import Page, Route

from server.kit.db import Database
from tests.support.browser import PHONE, Screenshots, VirtualAuthenticator
from tests.support.chain import free_port
from tests.support.oauth import enrollment_link_token
from tests.support.paywarden import RunningServer, serve, structured
from tests.support.tenants import AgentSetup, make_agent, make_member

pytestmark = pytest.mark.anyio

FLOW_TIMEOUT_S = 90


class MemoryStorage:
    """Where the SDK keeps its registration and tokens: in memory, for one test."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class PersonAtTheBrowser:
    """What the person does in Chromium when the client sends them to authorize: sign in with the
    passkey if asked, pick the agent, allow the scopes the test says, and come back."""

    def __init__(self, page: Page, screenshots: Screenshots, callback_port: int, agent_name: str) -> None:
        self.page = page
        self.screenshots = screenshots
        self.callback = f"http://localhost:{callback_port}/callback"
        self.agent_name = agent_name
        self.grant: list[str] | None = None  # None: every scope offered
        self.visits = 0
        self._returned: list[str] = []
        self._arrived = anyio.Event()

    async def install(self) -> None:
        async def arrive(route: Route) -> None:
            self._returned.append(route.request.url)
            self._arrived.set()
            await route.fulfill(
                status=200, content_type="text/plain", body="Signed in. You can close this window."
            )

        await self.page.route(f"{self.callback}*", arrive)

    async def redirect(self, authorization_url: str) -> None:
        self.visits += 1
        label = f"visit-{self.visits}"
        await self.page.goto(authorization_url)
        if urlsplit(self.page.url).path == "/login":
            await self.screenshots.take(self.page, f"{label}-sign-in")
            await self.page.get_by_role("button", name="Sign in with a passkey").click()
            await self.page.wait_for_url("**/oauth/authorize?**")
        await self.page.get_by_role("heading", name="Connect Paywarden SDK test client?").wait_for()
        await self.page.get_by_label(self.agent_name).check()
        if self.grant is not None:
            for box in await self.page.get_by_role("checkbox").all():
                value = await box.get_attribute("value")
                await (box.check() if value in self.grant else box.uncheck())
        await self.screenshots.take(self.page, f"{label}-consent")
        await self.page.set_viewport_size(PHONE)
        await self.screenshots.take(self.page, f"{label}-consent-phone")
        await self.page.set_viewport_size({"width": 1280, "height": 800})
        await self.page.get_by_role("button", name="Allow").click()

    async def come_back(self) -> AuthorizationCodeResult:
        await self._arrived.wait()  # bounded by the test's fail_after
        self._arrived = anyio.Event()
        found = parse_qs(urlsplit(self._returned.pop()).query)
        return AuthorizationCodeResult(
            code=found["code"][0], state=found.get("state", [None])[0], iss=found.get("iss", [None])[0]
        )


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


async def _enrol(page: Page, screenshots: Screenshots, server: RunningServer, db: Database) -> AgentSetup:
    """An owner opens their enrolment link and creates a passkey, then signs out."""
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="research-bot")
    member_id = make_member(db, agent.org_id, role="owner")
    token = enrollment_link_token(db, member_id, agent.org_id, clock=server.clock)
    await page.goto(f"{server.settings.pages_url}/enroll/{token}")
    await page.get_by_label("Name this passkey").fill("Test laptop")
    await page.get_by_role("button", name="Create a passkey").click()
    await page.wait_for_url("**/admin?welcome=1")
    await page.get_by_text("Your passkey is ready, and you are signed in.").wait_for()
    await screenshots.take(page, "enrolled-home")
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url("**/login?signed_out=1")
    return agent


@asynccontextmanager
async def _sdk_client(server: RunningServer, person: PersonAtTheBrowser, port: int) -> AsyncIterator[Client]:
    provider = OAuthClientProvider(
        server_url=server.settings.mcp_url,
        client_metadata=OAuthClientMetadata(
            client_name="Paywarden SDK test client",
            redirect_uris=[f"http://localhost:{port}/callback"],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=MemoryStorage(),
        redirect_handler=person.redirect,
        callback_handler=person.come_back,
    )
    http = httpx2.AsyncClient(auth=provider, timeout=60)
    async with http, Client(streamable_http_client(server.settings.mcp_url, http_client=http)) as client:
        yield client


async def test_the_official_client_connects_by_url_and_calls_get_budget(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    port = free_port()
    with anyio.fail_after(FLOW_TIMEOUT_S):
        agent = await _enrol(page, screenshots, paywarden, sqlite_db)
        person = PersonAtTheBrowser(page, screenshots, port, "research-bot")
        await person.install()
        async with _sdk_client(paywarden, person, port) as client:
            budget = structured(await client.call_tool("get_budget", {}))
        assert budget["agentId"] == agent.agent_id
        assert person.visits == 1
        await page.goto(f"{paywarden.settings.pages_url}/connections")
        await page.get_by_role("heading", name="Paywarden SDK test client").wait_for()
        await screenshots.take(page, "connections")
    assert len(await authenticator.credentials()) == 1


async def test_a_missing_scope_makes_the_client_ask_the_person_again(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    port = free_port()
    with anyio.fail_after(FLOW_TIMEOUT_S):
        await _enrol(page, screenshots, paywarden, sqlite_db)
        person = PersonAtTheBrowser(page, screenshots, port, "research-bot")
        person.grant = ["payments:read"]
        await person.install()
        async with _sdk_client(paywarden, person, port) as client:
            assert structured(await client.call_tool("get_budget", {}))["capLevel"] == "ok"
            person.grant = None  # the second time, the person allows what the call needs
            result = await client.call_tool("quote_payment", {"url": "https://api.example.com/x"})
            assert person.visits == 1  # payments:read was enough for a quote
            paid = await client.call_tool("fetch_paid", {"url": "https://unlisted.example/x"})
        assert person.visits == 2
        # The step-up worked: the call ran, and the policy (not the token) refused the host.
        assert paid.is_error
        assert paid.structured_content is not None
        assert paid.structured_content["error"]["code"] != "insufficient_scope"
        assert result is not None
