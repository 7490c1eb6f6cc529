"""The conformance suite's authorization-server scenarios pass against Paywarden's authorization
server: `conformance authorization` (0.2.0-alpha.12) checks the RFC 8414 metadata and runs an
authorization code grant with PKCE, `state`, `iss` and `resource`; the person's part (passkey
sign-in and consent) is done in Chromium. It registers a portless loopback redirect and listens on
a port of its own, so the loopback rule is exercised too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from playwright.async_api import Page

from server.kit.db import Database
from tests.support.browser import Screenshots, VirtualAuthenticator
from tests.support.chain import free_port
from tests.support.conformance import (
    AUTHORIZATION_SCENARIOS,
    SUITE_MISSING,
    AuthorizationRun,
    authorization_suite_installed,
)
from tests.support.oauth import enrollment_link_token, register
from tests.support.paywarden import RunningServer, serve
from tests.support.plugin import require
from tests.support.tenants import make_agent, make_member

pytestmark = pytest.mark.anyio

RUN_TIMEOUT_S = 120


@pytest.fixture
def paywarden(sqlite_db: Database) -> Iterator[RunningServer]:
    if not authorization_suite_installed():
        require(SUITE_MISSING)
    with serve(sqlite_db.url, public_host="localhost") as running:
        yield running


async def test_the_authorization_server_scenarios_pass(
    paywarden: RunningServer,
    sqlite_db: Database,
    page: Page,
    authenticator: VirtualAuthenticator,
    screenshots: Screenshots,
    tmp_path: Path,
) -> None:
    agent = make_agent(sqlite_db, paywarden.settings, allow_hosts=[], name="conformance-agent")
    member_id = make_member(sqlite_db, agent.org_id, role="owner")
    client = await anyio.to_thread.run_sync(
        lambda: register(
            paywarden, client_name="MCP conformance suite", redirect_uris=["http://127.0.0.1/callback"]
        )
    )
    run = AuthorizationRun(
        issuer=paywarden.settings.public_url,
        client_id=client["client_id"],
        resource=paywarden.settings.mcp_url,
        port=free_port(),
        output_dir=tmp_path / "results",
    )
    try:
        with anyio.fail_after(RUN_TIMEOUT_S):
            token = enrollment_link_token(sqlite_db, member_id, agent.org_id, clock=paywarden.clock)
            await page.goto(f"{paywarden.settings.pages_url}/enroll/{token}")
            await page.get_by_role("button", name="Create a passkey").click()
            await page.wait_for_url("**/admin?welcome=1")
            await page.get_by_role("button", name="Sign out").click()
            await page.wait_for_url("**/login?signed_out=1")

            url = await anyio.to_thread.run_sync(run.authorization_url)
            await page.goto(url)
            await page.get_by_role("button", name="Sign in with a passkey").click()
            await page.get_by_role("heading", name="Connect MCP conformance suite?").wait_for()
            await screenshots.take(page, "consent")
            await page.get_by_role("button", name="Allow").click()
            await page.wait_for_url("http://127.0.0.1:*/callback?**")
            result = await anyio.to_thread.run_sync(run.finish)
    finally:
        run.stop()

    statuses = {check.id: check.status for check in result.checks}
    problems = [check.describe() for check in result.checks if check.status != "SUCCESS"]
    assert not problems, "\n".join(problems) + "\n" + result.output[-3000:]
    assert statuses == {
        "authorization-server-metadata": "SUCCESS",
        "authorization-server-metadata-cimd": "SUCCESS",
        "authorization-code-grant": "SUCCESS",
    }, result.output[-3000:]
    assert result.exit_code == 0, result.output[-3000:]
    # Both scenarios ran (the suite was started without --scenario): a results folder for each.
    folders = [path.parent.name for path in (tmp_path / "results").rglob("checks.json")]
    ran = {scenario for scenario in AUTHORIZATION_SCENARIOS if any(scenario in name for name in folders)}
    assert ran == set(AUTHORIZATION_SCENARIOS), folders
