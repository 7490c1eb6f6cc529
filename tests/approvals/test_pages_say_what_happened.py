"""The pages say what happened, in real Chromium: after a decision the approval page names who
decided, when, and what became of the payment (never an internal word such as "consumed"); the
inbox has a Decided tab; networks are named (Base Sepolia, not eip155:84532); a connection's
permissions are in plain words and revoking asks once; and every page has a favicon (no 404)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import anyio
import pytest
from playwright.async_api import Page, Response, expect

from server.kit.db import Database
from server.models import Member
from tests.support.approval_page import decide_on_page, enrol_member
from tests.support.browser import Screenshots, VirtualAuthenticator
from tests.support.ledger import authorize_held_now, facts, reserve_now
from tests.support.oauth import connect, enrolled_person
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent

pytestmark = pytest.mark.anyio

PAGE_TIMEOUT_S = 90
WHEN = r"\d{4}-\d\d-\d\d \d\d:\d\d UTC"


@pytest.fixture
def server(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


def _email(db: Database, member_id: str) -> str:
    with db.read() as session:
        member = session.get(Member, member_id)
        assert member is not None
        return member.email


def _missing(page: Page) -> list[str]:
    """Every response of 400 or more the page's loads meet, as the test goes."""
    found: list[str] = []

    def note(response: Response) -> None:
        if response.status >= 400:
            found.append(f"{response.status} {response.url}")

    page.on("response", note)
    return found


async def test_a_decided_approval_says_who_decided_and_what_became_of_it(
    server: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    missing = _missing(page)
    agent = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"], name="ops-bot")
    purchase = facts("k-approved")
    held = reserve_now(sqlite_db, agent.agent_id, purchase, server.clock.now())
    assert held.approval is not None
    assert held.intent is not None
    other = reserve_now(sqlite_db, agent.agent_id, facts("k-denied", path="/v1/other"), server.clock.now())
    assert other.approval is not None
    pages = server.settings.public_url
    with anyio.fail_after(PAGE_TIMEOUT_S):
        member_id = await enrol_member(
            page, pages_url=pages, db=sqlite_db, org_id=agent.org_id, clock=server.clock, role="owner"
        )
        email = re.escape(_email(sqlite_db, member_id))
        await page.goto(f"{pages}/admin")
        await expect(page.get_by_role("link", name="ops-bot").first).to_be_visible()
        await expect(page.locator("main")).not_to_contain_text("eip155:")
        await expect(page.locator("main")).to_contain_text("on Base Sepolia")

        await page.goto(f"{pages}/approvals")
        await expect(page.get_by_role("link", name="Waiting")).to_have_attribute("aria-current", "page")
        await expect(page.get_by_role("link", name="0.01 USD to api.example.com").first).to_be_visible()
        await screenshots.take(page, "inbox-waiting")

        await decide_on_page(
            page,
            f"{pages}/approvals/{held.approval.id}",
            approve=True,
            screenshots=screenshots,
            pages_url=pages,
            heading="Approve 0.01 USD to api.example.com?",
            payee=purchase.selection.pay_to,
        )
        heading = page.get_by_role("heading", level=1)
        await expect(heading).to_have_text(
            re.compile(f"^Approved by {email} at {WHEN}: the payment will be made when the agent retries$")
        )
        # The agent's retry pays: the page now says the payment was made.
        authorize_held_now(sqlite_db, agent.agent_id, held.intent.id, purchase, server.clock.now())
        await page.reload()
        await expect(heading).to_have_text(
            re.compile(f"^Approved by {email} at {WHEN}: the payment was made$")
        )
        await expect(page.locator("main")).not_to_contain_text("consumed")
        await expect(page.locator("main")).to_contain_text("Base Sepolia")
        await screenshots.take(page, "approved-and-paid")

        await decide_on_page(
            page,
            f"{pages}/approvals/{other.approval.id}",
            approve=False,
            screenshots=screenshots,
            pages_url=pages,
            heading="Approve 0.01 USD to api.example.com?",
            payee=purchase.selection.pay_to,
        )
        await expect(heading).to_have_text(re.compile(f"^Denied by {email} at {WHEN}: nothing was paid$"))

        await page.goto(f"{pages}/approvals")
        await expect(page.get_by_text("Nothing is waiting for a decision.")).to_be_visible()
        await page.get_by_role("link", name="Decided").click()
        await page.wait_for_url("**/approvals?tab=decided")
        await expect(page.get_by_role("link", name="Decided")).to_have_attribute("aria-current", "page")
        decided = page.locator("main ul.cards li")
        await expect(decided).to_have_count(2)
        await expect(decided.nth(0)).to_contain_text(re.compile(f"Denied by {email} at {WHEN}"))
        await expect(decided.nth(1)).to_contain_text(
            re.compile(f"Approved by {email} at {WHEN}: the payment was made")
        )
        await expect(page.locator("main")).not_to_contain_text("consumed")
        await screenshots.take(page, "inbox-decided")
    assert missing == [], missing


async def test_connections_say_what_a_client_may_do_and_revoking_asks_once(
    server: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    missing = _missing(page)
    person = enrolled_person(server, sqlite_db)
    client, _ = connect(server, person, scopes=["payments:read"])
    person.browser.close()
    pages = server.settings.public_url
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(
            page, pages_url=pages, db=sqlite_db, org_id=person.agent.org_id, clock=server.clock, role="owner"
        )
        await page.goto(f"{pages}/connections")
        card = page.locator("main ul.cards li").filter(has_text="Test client")
        await expect(card).to_contain_text("See the agent's budget, payments and approvals")
        await expect(card).not_to_contain_text("payments:read,")
        await screenshots.take(page, "connections")

        await card.get_by_role("link", name="Revoke Test client").click()
        await page.wait_for_url("**/connections/*/revoke")
        await expect(page.get_by_role("heading", level=1)).to_have_text("Revoke Test client?")
        await screenshots.take(page, "revoke-asks")
        await page.get_by_role("link", name="Keep it").click()
        await page.wait_for_url(f"{pages}/connections")
        await expect(card).to_be_visible()  # asking changed nothing

        await card.get_by_role("link", name="Revoke Test client").click()
        await page.get_by_role("button", name="Revoke Test client").click()
        await page.wait_for_url("**/connections?done=revoked")
        await expect(
            page.get_by_text("The connection was revoked: its tokens no longer work.")
        ).to_be_visible()
        await expect(page.locator("main ul.cards li").filter(has_text="Test client")).to_have_count(0)
        await screenshots.take(page, "revoked")
    assert client["client_id"]
    assert missing == [], missing


async def test_every_page_has_a_favicon(server: RunningServer, page: Page) -> None:
    missing = _missing(page)
    await page.goto(f"{server.settings.public_url}/login")
    answer = await page.request.get(f"{server.settings.public_url}/favicon.ico")
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("image/")
    icon = await page.locator("link[rel=icon]").get_attribute("href")
    assert icon is not None
    assert (await page.request.get(f"{server.settings.public_url}{icon}")).status == 200
    assert missing == [], missing
