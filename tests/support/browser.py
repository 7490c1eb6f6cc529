"""Real Chromium for page tests: Debian's chromium driven by Playwright, passkeys included.

- `launch_chromium(profile_dir)`: a headless persistent context on /usr/bin/chromium (Playwright's
  own browser downloads are never used).
- `add_virtual_authenticator(page)`: a CDP virtual platform authenticator (CTAP2, resident keys,
  user verification) on that page, so `navigator.credentials.create()` and `.get()` complete by
  themselves. It lives on the page it was added to: a popup or a new tab does not have it.
- `Screenshots`: PNGs kept in the test output folder, which the test report names.

WebAuthn needs a secure context whose host matches the RP id: load pages from
`http://localhost:PORT` (see `localhost_url`), never `http://127.0.0.1:PORT`.
The fixtures that use these helpers are in fixtures_browser.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playwright.async_api import BrowserContext, CDPSession, Page, Route, ViewportSize, async_playwright

from tests.support.plugin import output_dir, record_test_output

DEBIAN_CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_MISSING = (
    "chromium not installed: run `apt-get install chromium` as root "
    "(or `make test-deps` as root, which does it)"
)
# --user-data-dir is Playwright's to set (launch_persistent_context refuses it here). No sandbox:
# CI runs as root, where Chromium's sandbox cannot start.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
DESKTOP: ViewportSize = {"width": 1280, "height": 800}
PHONE: ViewportSize = {"width": 390, "height": 844}
# Every Playwright wait (navigation, locator, expect) ends after this many milliseconds.
DEFAULT_TIMEOUT_MS = 10_000


def chromium_executable() -> Path | None:
    """$PAYWARDEN_CHROMIUM, else Debian's /usr/bin/chromium; None when neither is there."""
    override = os.environ.get("PAYWARDEN_CHROMIUM")
    path = Path(override) if override else DEBIAN_CHROMIUM
    return path if path.is_file() and os.access(path, os.X_OK) else None


def localhost_url(port: int, path: str = "/") -> str:
    """The URL a page test loads: host `localhost`, so WebAuthn accepts RP id `localhost`."""
    return f"http://localhost:{port}{path}"


@asynccontextmanager
async def launch_chromium(
    profile_dir: Path, *, executable: Path = DEBIAN_CHROMIUM, viewport: ViewportSize = DESKTOP
) -> AsyncIterator[BrowserContext]:
    """Headless Chromium with a fresh profile in `profile_dir`; closed on exit."""
    async with async_playwright() as playwright:
        context = await playwright.chromium.launch_persistent_context(
            profile_dir,
            executable_path=executable,
            headless=True,
            args=list(CHROMIUM_ARGS),
            viewport=viewport,
        )
        context.set_default_timeout(DEFAULT_TIMEOUT_MS)
        try:
            yield context
        finally:
            await context.close()


@dataclass
class VirtualAuthenticator:
    """Chrome's virtual authenticator on one page, driven over the DevTools protocol."""

    cdp: CDPSession
    authenticator_id: str

    async def credentials(self) -> list[dict[str, Any]]:
        """What it holds: credentialId, rpId, userHandle, signCount, isResidentCredential..."""
        result = await self.cdp.send("WebAuthn.getCredentials", {"authenticatorId": self.authenticator_id})
        return list(result["credentials"])

    async def set_user_verified(self, verified: bool) -> None:
        """False makes the next ceremonies fail user verification, as a wrong PIN or finger would."""
        await self.cdp.send(
            "WebAuthn.setUserVerified", {"authenticatorId": self.authenticator_id, "isUserVerified": verified}
        )

    async def clear_credentials(self) -> None:
        await self.cdp.send("WebAuthn.clearCredentials", {"authenticatorId": self.authenticator_id})

    async def remove(self) -> None:
        await self.cdp.send("WebAuthn.removeVirtualAuthenticator", {"authenticatorId": self.authenticator_id})


async def add_virtual_authenticator(page: Page) -> VirtualAuthenticator:
    """A platform passkey authenticator that verifies the user and answers without any prompt."""
    cdp = await page.context.new_cdp_session(page)
    await cdp.send("WebAuthn.enable", {"enableUI": False})
    added = await cdp.send(
        "WebAuthn.addVirtualAuthenticator",
        {
            "options": {
                "protocol": "ctap2",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
        },
    )
    return VirtualAuthenticator(cdp=cdp, authenticator_id=str(added["authenticatorId"]))


def screenshot_dir() -> Path:
    directory = output_dir() / "screenshots"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def file_stem(text: str) -> str:
    """A test id or label as a file name: `tests/a.py::test_b[x]` -> `tests-a.py-test_b-x`."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:150]


@dataclass(frozen=True)
class Screenshots:
    """Screenshots of one test, named `<test id>-<label>.png` in the test output folder."""

    test_id: str

    def path(self, label: str) -> Path:
        return screenshot_dir() / f"{file_stem(self.test_id)}-{file_stem(label)}.png"

    async def take(self, page: Page, label: str) -> Path:
        """The whole page as it is now, kept as a PNG; returns where."""
        path = self.path(label)
        await page.screenshot(path=path, full_page=True)
        record_test_output(path)
        return path


async def switch_device_after_step_up(page: Page, authenticator: VirtualAuthenticator) -> None:
    """Imitate a person who confirms a step-up with the passkey they have, then creates the new
    passkey on another device: once the page's step-up answer has verified, `authenticator`
    forgets its passkeys (one authenticator may not create a second passkey for one account)."""

    async def answered(route: Route) -> None:
        response = await route.fetch()
        if response.ok:
            await authenticator.clear_credentials()
        await route.fulfill(response=response)

    await page.route("**/account/passkeys/step-up/verify", answered)


# Controls without a label, headings, and the language: what every page must get right.
PAGE_AUDIT = """() => {
  const unlabelled = [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
    .filter(el => el.labels.length === 0 && !el.getAttribute('aria-label')).map(el => el.name || el.id);
  const unnamedButtons = [...document.querySelectorAll('button')].filter(b => !b.textContent.trim()).length;
  return {
    lang: document.documentElement.lang,
    h1: document.querySelectorAll('h1').length,
    unlabelled, unnamedButtons,
    overflow: document.documentElement.scrollWidth > window.innerWidth,
  };
}"""


async def check_page(page: Page) -> None:
    """What every page must get right: a language, one heading, a label on every control, a name on
    every button, no sideways scrolling, and the skip link first in the tab order."""
    found = await page.evaluate(PAGE_AUDIT)
    assert found["lang"] == "en"
    assert found["h1"] == 1
    assert found["unlabelled"] == []
    assert found["unnamedButtons"] == 0
    assert found["overflow"] is False, "the page scrolls sideways"
    await page.keyboard.press("Tab")
    first = await page.evaluate("document.activeElement.textContent.trim()")
    assert first == "Skip to the page's content"
