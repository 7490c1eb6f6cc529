"""The browser harness works: real Chromium runs passkey ceremonies that the server verifies.

A tiny relying party (tests.support.passkey_demo) is served on localhost; headless Debian Chromium
with a CDP virtual authenticator creates a passkey and signs in with it, the `webauthn` package
verifies both on the server, and each test keeps a screenshot in the test output folder.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator

import anyio
import pytest
from playwright.async_api import Page, Route

from tests.support.browser import (
    PHONE,
    Screenshots,
    VirtualAuthenticator,
    localhost_url,
)
from tests.support.local_server import serve_asgi
from tests.support.passkey_demo import USER_NAME, PasskeyDemo

pytestmark = pytest.mark.anyio

# Each ceremony takes a fraction of a second; this bounds a hang, not a slow machine.
CEREMONY_TIMEOUT_S = 20


@pytest.fixture(name="demo")
def fixture_demo() -> Iterator[PasskeyDemo]:
    demo = PasskeyDemo()
    with serve_asgi(demo.app()) as port:
        demo.origin = localhost_url(port).rstrip("/")
        yield demo


async def test_chromium_registers_a_passkey_and_signs_in_with_it(
    demo: PasskeyDemo, page: Page, authenticator: VirtualAuthenticator, screenshots: Screenshots
) -> None:
    with anyio.fail_after(CEREMONY_TIMEOUT_S):
        await page.goto(demo.origin + "/")
        assert await page.evaluate("window.isSecureContext") is True

        await page.get_by_role("button", name="Create a passkey").click()
        await page.get_by_role("status").filter(has_text="Passkey created.").wait_for()
        held = await authenticator.credentials()
        assert len(held) == 1
        assert held[0]["rpId"] == "localhost"
        assert held[0]["isResidentCredential"] is True

        await page.get_by_role("button", name="Sign in with a passkey").click()
        await page.get_by_role("status").filter(has_text=f"Signed in as {USER_NAME}.").wait_for()
        shot = await screenshots.take(page, "signed-in")

    registration, authentication = demo.verified
    assert registration["ceremony"] == "registration"
    assert registration["userVerified"] is True
    assert authentication["ceremony"] == "authentication"
    assert authentication["credentialId"] == registration["credentialId"]
    assert authentication["userVerified"] is True
    # Chrome's virtual authenticator counts from 1: the server saw the counter move.
    assert authentication["signCount"] > registration["signCount"]
    assert authentication["signCount"] == (await authenticator.credentials())[0]["signCount"]
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


async def test_an_assertion_over_another_challenge_is_refused(
    demo: PasskeyDemo, page: Page, authenticator: VirtualAuthenticator, screenshots: Screenshots
) -> None:
    """The browser signs a challenge the server never issued: verification refuses it."""

    async def swap_challenge(route: Route) -> None:
        response = await route.fetch()
        options = json.loads(await response.text())
        options["challenge"] = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
        await route.fulfill(response=response, json=options)

    await page.set_viewport_size(PHONE)
    with anyio.fail_after(CEREMONY_TIMEOUT_S):
        await page.goto(demo.origin + "/")
        registered = await page.evaluate("window.passkeyCheck.register()")
        assert registered["userVerified"] is True

        await page.route("**/login/options", swap_challenge)
        refused = await page.evaluate("window.passkeyCheck.signIn()")
        await screenshots.take(page, "refused")

    assert refused == {"error": "Client data challenge was not expected challenge"}
    await page.get_by_role("status").filter(has_text="Sign-in refused").wait_for()
    assert [outcome["ceremony"] for outcome in demo.verified] == ["registration"]
    # The authenticator did sign (its counter moved): only the server's check stopped it.
    assert (await authenticator.credentials())[0]["signCount"] >= 1


async def test_chromium_on_127_0_0_1_is_not_a_place_for_passkeys(demo: PasskeyDemo, page: Page) -> None:
    """Why page tests load localhost: from 127.0.0.1 the RP id `localhost` is refused."""
    port = demo.origin.rsplit(":", 1)[1]
    with anyio.fail_after(CEREMONY_TIMEOUT_S):
        await page.goto(f"http://127.0.0.1:{port}/")
        error = await page.evaluate("window.passkeyCheck.register().then(() => 'created', (e) => e.name)")
    assert error == "SecurityError"
    assert demo.verified == []
