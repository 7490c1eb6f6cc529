"""A held payment approved on a phone with a passkey while the agent's call waits, end to end:
the official MCP client (declaring URL elicitation) calls `fetch_paid` against a real server, a
real x402 seller and anvil; the payment is held; a member signed in with a passkey in headless
Chromium, on a 390-pixel phone, opens the URL the client was asked to open and decides there.

- protocol 2025-11-25 on a stateful session: approved, the same waiting call returns `paid` with
  the transfer on chain; denied, it ends in `approval_denied` and nothing moves; at 2026-07-28
  the SDK's driver retries at once with the sealed state, and that retry waits and pays;
- two `paywarden serve` processes on one database behind a proxy with affinity on
  `Mcp-Session-Id`: the call waits in process A, the member's browser is served by process B
  (signed out, the member signs in there first), and B's decision wakes A's call, which pays;
- protocol 2026-07-28: `input_required` with the URL and a sealed `requestState`; the member
  approves on the page; the client's retry with that state pays.

Screenshots of the page before and after each decision are kept in the test output."""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest
from mcp_types import CallToolResult, ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult
from playwright.async_api import Page, expect

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.mcp.held_payments import PROMPT_MESSAGE
from server.settings import Settings
from server.web.pages.approvals import PAID
from tests.e2e.test_approvals import Money
from tests.support.affinity_proxy import AffinityProxy
from tests.support.approval_page import DECIDED_BY, decide_on_page, enrol_member
from tests.support.browser import PHONE, Screenshots, VirtualAuthenticator
from tests.support.chain import Anvil, TestToken, free_port
from tests.support.databases import migrated_database
from tests.support.elicitation import (
    LEGACY,
    MODERN,
    UrlElicitations,
    approval_id_of,
    call_while_deciding,
    eliciting_client,
)
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, chain_environ, error_of, serve, settings_for, structured
from tests.support.processes import serve_processes
from tests.support.seller import Seller
from tests.support.tenants import AgentSetup, make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC
HEADING = "Approve 0.01 USD to 127.0.0.1?"
TEST_TIMEOUT_S = 90
# Long enough for a person to open the page and decide; the call ends at the first 2-second poll
# after the decision, so the limit itself costs nothing.
WAIT_MS = 30_000


def _environ(anvil: Anvil, test_usdc: TestToken, *, wait_ms: int) -> dict[str, str]:
    return {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": str(wait_ms),
    }


@pytest.fixture
def server(sqlite_db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, extra=_environ(anvil, test_usdc, wait_ms=WAIT_MS)) as running:
        yield running


@pytest.fixture
def postgres_db(tmp_path: Path) -> Iterator[Database]:
    with migrated_database("postgres", tmp_path) as database:
        yield database


@dataclass(frozen=True)
class Phone:
    """A member's phone: Chromium 390 pixels wide with a passkey authenticator."""

    page: Page
    screenshots: Screenshots

    def deciding(
        self, pages_url: str, seller: Seller, *, approve: bool, signed_out: bool = False
    ) -> Callable[[ElicitRequestURLParams], Awaitable[None]]:
        """The member opening an elicited URL and deciding there with the passkey (signing in
        first when `signed_out`)."""

        async def decide(request: ElicitRequestURLParams) -> None:
            await decide_on_page(
                self.page,
                request.url,
                approve=approve,
                screenshots=self.screenshots,
                pages_url=pages_url,
                heading=HEADING,
                payee=seller.pay_to,
                signed_out=signed_out,
            )

        return decide


@pytest.fixture
async def phone(page: Page, authenticator: VirtualAuthenticator, screenshots: Screenshots) -> Phone:
    await page.set_viewport_size(PHONE)
    return Phone(page, screenshots)


def _agent(db: Database, settings: Settings, wallet: FundedWallet) -> AgentSetup:
    """An agent whose first payment to the seller is held: the organisation never paid it."""
    return make_agent(db, settings, allow_hosts=["127.0.0.1"], wallet_key=wallet.private_key)


def _paid_on_chain(result: CallToolResult, anvil: Anvil, money: Money) -> None:
    paid = structured(result)
    assert (paid["status"], paid["replayed"], paid["receipt"]["state"]) == ("paid", False, "settled")
    receipt = anvil.w3.eth.get_transaction_receipt(paid["receipt"]["txHash"])
    assert receipt["status"] == 1
    assert money.moved() == PREMIUM
    assert money.signatures("/premium") == 1


def _asked_for_the_page(request: ElicitRequestURLParams, public_url: str) -> None:
    assert (request.mode, request.message) == ("url", PROMPT_MESSAGE)
    assert request.url == f"{public_url}/approvals/{approval_id_of(request)}"
    assert approval_id_of(request).startswith("apr_")


@dataclass(frozen=True)
class Scene:
    """One server; an agent whose payment to the seller is held; a member signed in on a phone."""

    server: RunningServer
    setup: AgentSetup
    seller: Seller
    money: Money
    anvil: Anvil
    phone: Phone

    def deciding(self, *, approve: bool) -> Callable[[ElicitRequestURLParams], Awaitable[None]]:
        return self.phone.deciding(self.server.settings.pages_url, self.seller, approve=approve)


@pytest.fixture
async def scene(
    server: RunningServer,
    sqlite_db: Database,
    anvil: Anvil,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    phone: Phone,
) -> Scene:
    setup = _agent(sqlite_db, server.settings, funded_wallet)
    with anyio.fail_after(TEST_TIMEOUT_S):
        await enrol_member(
            phone.page,
            pages_url=server.settings.pages_url,
            db=sqlite_db,
            org_id=setup.org_id,
            clock=server.clock,
        )
    money = Money(test_usdc, seller, funded_wallet.address)
    return Scene(server, setup, seller, money, anvil, phone)


@pytest.mark.parametrize(
    ("mode", "approve"),
    [(LEGACY, True), (LEGACY, False), (MODERN, True)],
    ids=["2025-11-25-approved", "2025-11-25-denied", "2026-07-28-approved"],
)
async def test_a_waiting_call_is_decided_on_a_phone_with_a_passkey(
    mode: str, approve: bool, scene: Scene
) -> None:
    """At 2025-11-25 the call itself waits; at 2026-07-28 the SDK's own multi-round-trip driver
    shows the URL and retries at once with the sealed state, and that retry waits."""
    server, phone, money = scene.server, scene.phone, scene.money
    elicitations = UrlElicitations("accept")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with eliciting_client(
            server.mcp_url, scene.setup.token, mode=mode, elicitations=elicitations
        ) as client:
            protocol = client.protocol_version
            started = time.monotonic()
            result = await call_while_deciding(
                client,
                {"url": scene.seller.url("/premium"), "maxAmountUsd": "1.00"},
                elicitations,
                scene.deciding(approve=approve),
            )
            waited = time.monotonic() - started
    request = elicitations.only()
    _asked_for_the_page(request, server.settings.public_url)
    if mode == LEGACY:
        assert protocol == "2025-11-25"
        assert request.elicitation_id
        assert elicitations.completed == [request.elicitation_id]  # the client may close its prompt
    assert waited < WAIT_MS / 1000 / 2, "the call was not woken by the decision"
    if approve:
        _paid_on_chain(result, scene.anvil, money)
    else:
        assert error_of(result)["code"] == "approval_denied"
        assert money.moved() == 0
        assert money.signatures("/premium") == 0
    # The page now says what became of it: the call that waited used the approval up.
    await phone.page.reload()
    heading, said = (
        (f"^Approved {DECIDED_BY}: the payment was made$", PAID)
        if approve
        else (f"^Denied {DECIDED_BY}: nothing was paid$", "Nothing will be paid.")
    )
    await expect(phone.page.get_by_role("heading", level=1)).to_have_text(re.compile(heading))
    await expect(phone.page.get_by_text(said)).to_be_visible()
    await phone.screenshots.take(phone.page, "after-the-call")


async def test_an_approval_on_process_b_wakes_the_call_waiting_on_process_a(
    postgres_db: Database,
    anvil: Anvil,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    tmp_path: Path,
    phone: Phone,
) -> None:
    extra = _environ(anvil, test_usdc, wait_ms=WAIT_MS)
    port = free_port()
    public_url = f"http://127.0.0.1:{port}"  # the load balancer's: both processes serve it
    with (
        serve_processes(
            2, database_url=postgres_db.url, extra=extra, workdir=tmp_path, public_url=public_url
        ) as (_, servers),
        AffinityProxy([server.base_url for server in servers], port=port) as proxy,
    ):
        settings = settings_for(database_url=postgres_db.url, port=port, extra=extra)
        setup = _agent(postgres_db, settings, funded_wallet)
        money = Money(test_usdc, seller, funded_wallet.address)
        elicitations = UrlElicitations("accept")
        with anyio.fail_after(TEST_TIMEOUT_S):
            async with eliciting_client(
                f"{proxy.url}/mcp", setup.token, mode=LEGACY, elicitations=elicitations
            ) as client:
                (session_id,) = proxy.sessions
                a = proxy.backend_of(session_id)
                b = next(server.base_url for server in servers if server.base_url != a)
                proxy.pinned = b  # the browser, without a session, is served by B only
                await enrol_member(
                    phone.page,
                    pages_url=settings.pages_url,
                    db=postgres_db,
                    org_id=setup.org_id,
                    clock=SystemClock(),  # `paywarden serve` processes keep the machine's time
                )
                await phone.page.get_by_role("button", name="Sign out").click()
                # Signed out, as on a phone that follows the link from the agent's client: B
                # signs the member in with the passkey and sends them back to the page.
                on_b = phone.deciding(settings.pages_url, seller, approve=True, signed_out=True)

                result = await call_while_deciding(
                    client, {"url": seller.url("/premium")}, elicitations, on_b
                )
    request = elicitations.only()
    # Under the one origin: the loopback address the processes were given is kept as localhost.
    assert settings.public_url == f"http://localhost:{port}"
    _asked_for_the_page(request, settings.public_url)
    _paid_on_chain(result, anvil, money)
    decision = f"/approvals/{approval_id_of(request)}/verify"
    assert [backend for backend, method, path in proxy.requests if path == decision] == [b]
    assert {backend for backend, _, path in proxy.requests if path == "/mcp"} == {a}
    assert {backend for backend, _, path in proxy.requests if path != "/mcp"} == {b}  # every page
    assert proxy.sessions == {session_id: a}


async def test_modern_input_required_approved_on_the_page_then_the_retry_pays(scene: Scene) -> None:
    """The client shows the URL itself; the member approves; only then does the client retry with
    the sealed state, which pays at once."""
    server, money = scene.server, scene.money
    arguments = {"url": scene.seller.url("/premium"), "maxAmountUsd": "1.00"}
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with eliciting_client(
            server.mcp_url, scene.setup.token, mode=MODERN, elicitations=UrlElicitations()
        ) as client:
            first = await client.session.call_tool("fetch_paid", arguments, allow_input_required=True)
            assert isinstance(first, InputRequiredResult), first
            assert first.input_requests is not None
            assert first.request_state is not None
            (ask,) = first.input_requests.values()
            assert isinstance(ask, ElicitRequest)
            assert isinstance(ask.params, ElicitRequestURLParams)
            _asked_for_the_page(ask.params, server.settings.public_url)
            await scene.deciding(approve=True)(ask.params)
            assert money.signatures("/premium") == 0
            retried = await client.session.call_tool(
                "fetch_paid",
                arguments,
                input_responses={"approval": ElicitResult(action="accept")},
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert isinstance(retried, CallToolResult)
    _paid_on_chain(retried, scene.anvil, money)
