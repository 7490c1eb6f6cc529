"""The agent's page, for a wallet kept at Coinbase CDP (the stand-in): which account holds the key,
whether the account's own policy is the one compiled from the agent's now, as Paywarden last sent
it and as CDP holds it (checked while the page is drawn), each difference in words, and a failure
to send it with when it is tried again. A viewer sees the same. In Chromium, kept as screenshots."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

import anyio
import pytest
from playwright.async_api import Page, expect

from server.kit.db import Database
from server.policy.service import PolicyChanges
from server.wallet_policies.sync import WalletPolicySync
from tests.support.approval_page import enrol_member
from tests.support.browser import DESKTOP, PHONE, Screenshots, VirtualAuthenticator
from tests.support.cdp import connected
from tests.support.cdp_standin import CdpStandIn, StoredPolicy, running_standin
from tests.support.oauth import Person, enrolled_person
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import change_policy


@dataclass(frozen=True)
class Stage:
    server: RunningServer
    standin: CdpStandIn
    api_url: str


@pytest.fixture(name="stage")
def fixture_stage(sqlite_db: Database) -> Iterator[Stage]:
    with (
        running_standin() as (standin, url),
        serve(sqlite_db.url, public_host="localhost", extra={"PAYWARDEN_CDP_API_URL": url}) as server,
    ):
        yield Stage(server, standin, url)


def _connected_owner(stage: Stage, db: Database) -> tuple[Person, dict[str, object]]:
    owner = enrolled_person(stage.server, db)
    wallet = connected(
        db, api_url=stage.api_url, agent=owner.agent.agent_id, credentials=stage.standin.credentials
    )
    return owner, wallet


def test_a_cdp_wallet_in_step_then_changed_then_failing_to_send(stage: Stage, sqlite_db: Database) -> None:
    owner, wallet = _connected_owner(stage, sqlite_db)
    path = f"/admin/agents/{owner.agent.agent_id}"
    try:
        page = owner.browser.get(path).text
        assert f"<code>{wallet['accountName']}</code>" in page
        assert f"sent the policy compiled from version {wallet['policyVersion']}" in page
        assert "Checked now: CDP holds the policy compiled from this agent's version" in page

        # The policy changes; no job has sent it yet: both the row and CDP say so.
        version = change_policy(
            sqlite_db, owner.agent.agent_id, PolicyChanges(max_usd_per_tx=Decimal("0.50"))
        )
        page = owner.browser.get(path).text
        assert f"Policy version {version} is not at CDP yet" in page
        assert "the policy CDP holds differs from the one compiled from this agent's version" in page
        assert "it signs TransferWithAuthorization of the token" in page
        assert "of at most 0.50 USDC, to any payee." in page  # what Paywarden compiles now, in words

        # CDP is down: the job's attempt fails and the page says when it is tried again.
        stage.standin.down = True
        services = stage.server.services
        job = WalletPolicySync(db=services.db, clock=services.clock, reach=services.cdp)
        assert anyio.run(job.run_once) == 1
        page = owner.browser.get(path).text
        assert "could not be sent to CDP (CDP could not be reached or did not answer in time)" in page
        assert "What CDP holds could not be checked now" in page
    finally:
        stage.standin.down = False
        owner.browser.close()


@pytest.mark.anyio
async def test_the_cdp_wallet_on_a_phone_and_a_desktop_with_a_policy_changed_at_cdp(
    stage: Stage,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
) -> None:
    del authenticator  # present on the page: the passkey is made there
    owner, wallet = await anyio.to_thread.run_sync(_connected_owner, stage, sqlite_db)
    owner.browser.close()
    site = stage.server.settings.pages_url
    await enrol_member(
        page, pages_url=site, db=sqlite_db, org_id=owner.agent.org_id, clock=stage.server.clock, role="viewer"
    )

    def loosen(policy: StoredPolicy) -> None:
        policy.rules[0]["criteria"][1]["conditions"][0]["value"] = "99000000"

    stage.standin.tamper(str(wallet["cdpPolicyId"]), loosen)
    await page.goto(f"{site}/admin/agents/{owner.agent.agent_id}")
    await expect(page.get_by_role("heading", name="Kept at Coinbase CDP")).to_be_visible()
    drift = page.locator("#cdp-drift")
    await expect(drift).to_contain_text("the policy CDP holds differs")
    await expect(drift).to_contain_text("of at most 99.00 USDC")
    for size, label in ((PHONE, "agent-cdp-wallet-390"), (DESKTOP, "agent-cdp-wallet-1280")):
        await page.set_viewport_size(size)
        if size is PHONE:
            assert await page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        await screenshots.take(page, label)
