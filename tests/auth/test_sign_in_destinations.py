"""After signing in, a person lands on a path of this site that the server rebuilt, whatever the
`next` of the sign-in link said: in real Chromium with a passkey, since it is the browser's own
clean-up of a URL (dropping tabs and newlines, reading backslashes as slashes) that turns a path
which looks local into another site."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote, urlsplit

import anyio
import pytest
from playwright.async_api import Page, Route

from server.kit.db import Database
from server.web.pages.destinations import HOME, after_sign_in
from tests.support.browser import Screenshots, VirtualAuthenticator
from tests.support.oauth import enrollment_link_token
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member

PAGE_TIMEOUT_S = 90

# The `next` of a sign-in link as it is written in the link's query.
HOSTILE_LINKS = [
    "/%09/evil.example/phish",
    "/%0a/evil.example",
    "/%0d%0a/evil.example",
    "/\\/evil.example",
    "/%5C/evil.example",
    "/%252F/evil.example",
    "/%252f%252fevil.example",
    "https:evil.example",
    "https://evil.example/phish",
    "//evil.example",
    "/%20/evil.example",
]
VALID = "/approvals?state=pending"


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    # Each hostile link is one more sign-in from this address: more than the default limit allows.
    with serve(
        sqlite_db.url, public_host="localhost", extra={"PAYWARDEN_RATE_LIMIT_SIGN_IN": "200"}
    ) as running:
        yield running


@pytest.mark.parametrize(
    "value",
    [
        "/\t/evil.example/phish",
        "/\n/evil.example",
        "/\r/evil.example",
        "/\\/evil",
        "/%2F/evil",
        "/%2f/evil",
        "/%5c/evil",
        "/%09/evil",
        "/\u2028/evil",
        "/\u00a0/evil",
        "https:evil.example",
        "//evil.example",
        "/" + "a" * 5000,
        "",
        None,
        "admin",
    ],
)
def test_a_destination_a_browser_might_rewrite_goes_home(value: str | None) -> None:
    assert after_sign_in(value, origin="https://pay.example") == HOME


def test_a_plain_path_keeps_its_path_and_query_but_no_fragment() -> None:
    assert after_sign_in("/approvals/apr_1?x=1#top", origin="https://pay.example") == "/approvals/apr_1?x=1"
    # The OAuth consent page is the usual destination: its query carries encoded URLs and spaces.
    authorize = "/oauth/authorize?redirect_uri=http%3A%2F%2F127.0.0.1%3A9%2Fcb&scope=a%20b&state=%2F"
    assert after_sign_in(authorize, origin="https://pay.example") == authorize
    # Encoded slashes and controls are refused in the path, where a browser could act on them.
    assert after_sign_in("/oauth%2F..%2Fevil?x=1", origin="https://pay.example") == HOME
    # Dot segments are resolved by the server, as a browser would resolve them.
    assert after_sign_in("/a/../admin", origin="https://pay.example") == "/admin"


async def _signed_out_member(page: Page, server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=[], name="ops-bot")
    member_id = make_member(db, agent.org_id, role="owner")
    token = enrollment_link_token(db, member_id, agent.org_id, clock=server.clock)
    await page.goto(f"{server.settings.pages_url}/enroll/{token}")
    await page.get_by_label("Name this passkey").fill("Work laptop")
    await page.get_by_role("button", name="Create a passkey").click()
    await page.wait_for_url("**/admin?welcome=1")
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url("**/login?signed_out=1")


async def _sign_in_with(page: Page, server: RunningServer, link_next: str) -> str:
    """Where the browser is once a passkey sign-in from `/login?next=<link_next>` has finished."""
    await page.goto(f"{server.settings.pages_url}/login?next={link_next}")
    await page.get_by_role("button", name="Sign in with a passkey").click()
    await page.wait_for_url(lambda url: "/login" not in url)
    await page.wait_for_load_state()
    return page.url


@pytest.mark.anyio
async def test_no_sign_in_link_leaves_the_site(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    left: list[str] = []

    async def elsewhere(route: Route) -> None:
        left.append(route.request.url)
        await route.fulfill(status=200, body="another site")

    # By host, not by a glob: a glob would also match the sign-in link that names evil.example.
    await page.route(lambda url: urlsplit(url).hostname == "evil.example", elsewhere)
    site = paywarden.settings.pages_url
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await _signed_out_member(page, paywarden, sqlite_db)
        landed = {}
        for link_next in HOSTILE_LINKS:
            landed[link_next] = await _sign_in_with(page, paywarden, link_next)
            await page.get_by_role("button", name="Sign out").click()
            await page.wait_for_url("**/login?signed_out=1")
        assert left == []
        assert landed == dict.fromkeys(HOSTILE_LINKS, f"{site}{HOME}")

        assert await _sign_in_with(page, paywarden, quote(VALID, safe="")) == f"{site}{VALID}"
        await screenshots.take(page, "valid-destination")
        # Signed in already, the sign-in page sends the person on at once: the same rule holds.
        for link_next in HOSTILE_LINKS:
            await page.goto(f"{site}/login?next={link_next}")
            assert page.url == f"{site}{HOME}"
        await page.goto(f"{site}/login?next={quote(VALID, safe='')}")
        assert page.url == f"{site}{VALID}"
        assert left == []
