"""A member deciding a held payment on the approval page, in real Chromium with a passkey.

- `enrol_member(page, ...)`: a new member of the organisation, enrolled in that browser with a
  passkey of its virtual authenticator, and signed in;
- `decide_on_page(page, url, ...)`: the member opens an approval URL (the one an agent or an
  MCP client was given), checks it is the approval page of a pending payment, and approves or
  denies with the passkey; screenshots before and after;
- `decide_change_on_page(page, url, ...)`: the same for a policy change an agent asked for (its
  `manageUrl`): approve or reject it with the passkey.
"""

from __future__ import annotations

import re

from playwright.async_api import Page, expect

from server.kit.clock import Clock
from server.kit.db import Database
from tests.support.browser import Screenshots
from tests.support.oauth import enrollment_link_token
from tests.support.tenants import make_member

APPROVE = re.compile(r"^Approve \d+\.\d+ USD$")
# Who decided, when, and what became of the payment (the heading after a decision).
DECIDED_BY = r"by person-[0-9a-f]{6}@example\.com at \d{4}-\d\d-\d\d \d\d:\d\d UTC"
DECIDED = {
    True: (
        "You approved this payment.",
        re.compile(f"^Approved {DECIDED_BY}: the payment (will be made when the agent retries|was made)$"),
    ),
    False: (
        "You denied this payment. Nothing will be paid.",
        re.compile(f"^Denied {DECIDED_BY}: nothing was paid$"),
    ),
}


async def enrol_member(
    page: Page, *, pages_url: str, db: Database, org_id: str, clock: Clock, role: str = "approver"
) -> str:
    """A member with `role`, signed in on `page` with a passkey created there; returns the member's
    id. `clock` is the server's: the enrolment link is issued at its time."""
    member_id = make_member(db, org_id, role=role)
    await page.goto(f"{pages_url}/enroll/{enrollment_link_token(db, member_id, org_id, clock=clock)}")
    await page.get_by_role("button", name="Create a passkey").click()
    await page.wait_for_url("**/admin?welcome=1")
    return member_id


async def decide_on_page(
    page: Page,
    url: str,
    *,
    approve: bool,
    screenshots: Screenshots,
    pages_url: str,
    heading: str,
    payee: str,
    signed_out: bool = False,
) -> None:
    """Open `url`, see the pending approval titled `heading` at `pages_url`/approvals/<id>, paying
    `payee`, and decide it with the passkey. A `signed_out` member signs in with the passkey first
    and is sent back. Screenshots `approval-page`, then `approved` or `denied`."""
    approval_id = url.rsplit("/", 1)[1]
    await page.goto(url)
    if signed_out:
        await expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to Paywarden")
        await screenshots.take(page, "sign-in-first")
        await page.get_by_role("button", name="Sign in with a passkey").click()
        await page.wait_for_url(f"{pages_url}/approvals/{approval_id}")
    assert page.url == f"{pages_url}/approvals/{approval_id}", page.url
    await expect(page.get_by_role("heading", level=1)).to_have_text(heading)
    await expect(page.locator("#payee-full")).to_have_text(payee)
    await screenshots.take(page, "approval-page")
    button = page.get_by_role("button", name=APPROVE) if approve else page.get_by_role("button", name="Deny")
    await button.click()
    said, title = DECIDED[approve]
    await expect(page.get_by_text(said)).to_be_visible()
    await expect(page.get_by_role("heading", level=1)).to_have_text(title)
    await screenshots.take(page, "approved" if approve else "denied")


# Who decided a policy change, when, and what became of it (the heading after a decision).
CHANGE_DECIDED = {
    True: (
        "You approved this change. It is in force now, and the agent may try again.",
        re.compile(f"^Approved {DECIDED_BY}: the agent's policy is now version \\d+$"),
    ),
    False: (
        "You rejected this change. Nothing changed.",
        re.compile(f"^Rejected {DECIDED_BY}: nothing changed$"),
    ),
}


async def decide_change_on_page(
    page: Page, url: str, *, approve: bool, screenshots: Screenshots, pages_url: str, agent: str
) -> None:
    """Open a policy change's `url` (at `pages_url`/policy-changes/<id>), see agent `agent` ask
    for it, and approve or reject it with the passkey. Screenshots `change-page`, then `approved`
    or `rejected`."""
    request_id = url.rsplit("/", 1)[1]
    await page.goto(url)
    assert page.url == f"{pages_url}/policy-changes/{request_id}", page.url
    await expect(page.get_by_role("heading", level=1)).to_have_text(f"Change what agent {agent} may pay?")
    await screenshots.take(page, "change-page")
    button = "Approve the change" if approve else "Reject"
    await page.get_by_role("button", name=button, exact=True).click()
    said, title = CHANGE_DECIDED[approve]
    await expect(page.get_by_text(said)).to_be_visible()
    await expect(page.get_by_role("heading", level=1)).to_have_text(title)
    await screenshots.take(page, "approved" if approve else "rejected")
