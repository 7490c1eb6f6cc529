"""What a member reads on the approval page is every field the passkey's challenge binds: the
amount, the asset, the payee, the network, the host and the whole resource with its query. Read
from the page's rendered text in real Chromium (what a person sees, after opening what is folded),
compared with the approval's row, for a resource short enough to show at once and one long enough
to fold."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import Approval
from tests.support.approval_page import enrol_member
from tests.support.browser import Screenshots, VirtualAuthenticator
from tests.support.ledger import CENT, facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent

PAGE_TIMEOUT_S = 90
# The query is what a path-only page would hide: a different report, for a different account.
SHORT = "/v1/reports?account=acme&range=2026"
LONG = "/v1/export?" + "&".join(f"field{n}=value-{n:03d}" for n in range(40)) + "&to=<b>me</b>"


@pytest.fixture
def paywarden(sqlite_db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost", clock=clock) as running:
        yield running


def _held(db: Database, agent_id: str, clock: FrozenClock, key: str, path: str) -> Approval:
    held = reserve_now(db, agent_id, facts(key, path=path, amount=50 * CENT), clock.now())
    assert held.kind == "held", held
    assert held.approval is not None
    return held.approval


async def _shown(page: Page) -> str:
    """The payment's facts as the page renders them, with every disclosure opened."""
    for folded in await page.locator("dl.facts details").all():
        await folded.locator("summary").click()
    return " ".join((await page.locator("dl.facts").inner_text()).split())


@pytest.mark.anyio
async def test_the_page_shows_every_field_the_passkey_signs(
    paywarden: RunningServer,
    sqlite_db: Database,
    clock: FrozenClock,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=["api.example.com"], name="ops-bot")
    site = paywarden.settings.pages_url
    with anyio.fail_after(PAGE_TIMEOUT_S):
        await enrol_member(page, pages_url=site, db=sqlite_db, org_id=agent.org_id, clock=clock)
        for label, path in (("short", SHORT), ("long", LONG)):
            approval = _held(sqlite_db, agent.agent_id, clock, f"shown-{label}", path)
            assert approval.resource == f"https://api.example.com{path}"
            await page.goto(f"{site}/approvals/{approval.id}")
            heading = page.get_by_role("heading", level=1)
            await expect(heading).to_have_text("Approve 0.50 USD to api.example.com?")
            folded = page.locator("dl.facts details")
            if label == "long":
                # Folded, it still says how much there is and where it starts.
                assert await folded.count() == 1
                assert "characters" in await folded.locator("summary").inner_text()
                await screenshots.take(page, "long-resource-folded")
            else:
                assert await folded.count() == 0
            text = await _shown(page)
            await screenshots.take(page, f"{label}-resource")
            bound = {
                "amount": f"{approval.amount_atomic} units",
                "asset": approval.asset,
                "payee": approval.pay_to,
                "network": approval.network,
                "host": approval.host,
                "resource": approval.resource,
            }
            for field, value in bound.items():
                assert value in text, f"{field} {value!r} is not on the page: {text}"
            # The query, markup included, is plain text: nothing of it became an element.
            assert urlsplit(approval.resource).query in text
            assert await page.locator("dl.facts b").count() == 0
