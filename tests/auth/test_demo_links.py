"""What `make run` prints leads somewhere: the demo's enrolment link signs the demo owner up and
lands on a working page, its admin URL answers (never a 404), and an operator can print a new
enrolment link for a member who lost their passkeys."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from server.kit.db import Database
from tests.support.cli import run_cli
from tests.support.oauth import SoftBrowser, enroll_token
from tests.support.paywarden import RunningServer, serve


@pytest.fixture
def default_host_server(sqlite_db: Database) -> Iterator[RunningServer]:
    """A server with the default kind of public URL: a loopback address (http://127.0.0.1:PORT)."""
    with serve(sqlite_db.url) as running:
        yield running


def test_the_demo_enrolment_link_signs_the_owner_up(
    default_host_server: RunningServer, sqlite_db: Database
) -> None:
    server = default_host_server
    demo = run_cli(sqlite_db.url, "demo", "--json", public_url=server.settings.public_url).json()
    pages = f"http://localhost:{server.port}"
    assert demo["mcpUrl"] == f"{server.settings.public_url}/mcp"
    assert demo["adminUrl"] == f"{pages}/admin"
    assert demo["enrollUrl"].startswith(f"{pages}/enroll/pw_en_")
    assert httpx.get(demo["adminUrl"]).status_code == 302  # to the sign-in page, not a 404
    assert httpx.get(demo["adminUrl"], follow_redirects=True).status_code == 200
    with SoftBrowser(server) as browser:
        welcome = browser.get(demo["enrollUrl"].removeprefix(pages))
        assert welcome.status_code == 200
        assert "owner@demo.example" in welcome.text
        landed = browser.enroll(enroll_token(demo["enrollUrl"])).json()["redirect"]
        home = browser.get(landed)
        assert home.status_code == 200
        assert "demo-agent" in home.text
    again = run_cli(sqlite_db.url, "demo", "--json", public_url=server.settings.public_url).json()
    assert again["enrollUrl"] is None
    human = run_cli(sqlite_db.url, "demo", public_url=server.settings.public_url).stdout
    assert f"Sign in as the demo owner (owner@demo.example) with your passkey: {pages}/admin" in human
    assert f"claude mcp add --transport http paywarden {server.settings.public_url}/mcp\n" in human


def test_an_operator_prints_a_new_enrolment_link(
    default_host_server: RunningServer, sqlite_db: Database
) -> None:
    server = default_host_server
    run_cli(sqlite_db.url, "admin", "org", "create", "acme")
    first = run_cli(
        sqlite_db.url,
        "admin",
        "member",
        "create",
        "--org",
        "acme",
        "--email",
        "ana@example.com",
        "--role",
        "admin",
        "--json",
        public_url=server.settings.public_url,
    ).json()
    second = run_cli(
        sqlite_db.url,
        "admin",
        "member",
        "enroll-link",
        "ana@example.com",
        "--org",
        "acme",
        "--json",
        public_url=server.settings.public_url,
    ).json()
    assert second["memberId"] == first["memberId"]
    assert second["enrollUrl"] != first["enrollUrl"]
    assert second["expiresAt"]
    pages = f"http://localhost:{server.port}"
    assert httpx.get(first["enrollUrl"]).status_code == 410  # the earlier link stopped working
    with SoftBrowser(server) as browser:
        assert browser.get(second["enrollUrl"].removeprefix(pages)).status_code == 200
        assert browser.enroll(enroll_token(second["enrollUrl"])).status_code == 200
