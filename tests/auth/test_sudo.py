"""Sudo: a user-verified passkey assertion at /account/sudo lets that browser session, and only it,
make changes that widen authority for PAYWARDEN_SUDO_SECONDS. Freshness lives in the database
(`has_recent_sudo`), so every process answers alike. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

import anyio
import httpx
import pytest
from starlette.requests import Request

from auth.sessions import new_browser_secret, resolve_session
from auth.step_up import has_recent_sudo
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.web.pages.common import Visit
from server.web.pages.sudo import sudo_or_redirect
from tests.support.oauth import Person, SoftBrowser, csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve


@pytest.fixture
def server_on(db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(db.url, public_host="localhost", clock=clock) as running:
        yield running


@pytest.fixture
def member(server_on: RunningServer, db: Database) -> Iterator[Person]:
    person = enrolled_person(server_on, db)
    yield person
    person.browser.close()


def _fresh(db: Database, browser: SoftBrowser, clock: FrozenClock) -> bool:
    secret = str(browser.http.cookies.get("pw_session"))
    with db.read() as session:
        signed_in = resolve_session(session, secret, now=clock.now())
        assert signed_in is not None
        return has_recent_sudo(
            session, member_id=signed_in.member.id, session_id=signed_in.session_id, now=clock.now()
        )


def _start(browser: SoftBrowser, next_path: str = "/approvals") -> tuple[str, dict[str, object]]:
    page = browser.get(f"/account/sudo?next={next_path}")
    assert page.status_code == 200, page.text
    csrf = csrf_of(page.text)
    started = browser.http.post("/account/sudo/options", json={"csrf": csrf})
    assert started.status_code == 200, started.text
    return csrf, started.json()


def _answer(
    browser: SoftBrowser, csrf: str, started: dict[str, object], answer: object, next_path: str
) -> httpx.Response:
    return browser.http.post(
        "/account/sudo/verify",
        json={"csrf": csrf, "challengeId": started["challengeId"], "credential": answer, "next": next_path},
    )


def _sudo(browser: SoftBrowser, next_path: str = "/approvals") -> httpx.Response:
    csrf, started = _start(browser, next_path)
    answer = browser.authenticator.authenticate(started["publicKey"])  # type: ignore[arg-type]
    return _answer(browser, csrf, started, answer, next_path)


def test_sudo_is_fresh_for_five_minutes_in_its_own_session(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    browser = member.browser
    assert not _fresh(db, browser, clock)
    done = _sudo(browser)
    assert done.status_code == 200, done.text
    assert done.json() == {"redirect": "/approvals"}
    assert _fresh(db, browser, clock)
    assert "You confirmed recently" in browser.get("/account/sudo?next=/approvals").text

    # Another session of the same member, with the same passkey, is not in sudo.
    with SoftBrowser(server_on) as elsewhere:
        elsewhere.authenticator = browser.authenticator
        assert elsewhere.sign_in().status_code == 200
        assert not _fresh(db, elsewhere, clock)

    clock.advance(299)
    assert _fresh(db, browser, clock)
    clock.advance(2)
    assert not _fresh(db, browser, clock)


def test_another_member_gains_nothing_from_a_members_sudo(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    other = enrolled_person(server_on, db, org_id=member.agent.org_id)
    assert _sudo(member.browser).status_code == 200
    assert _fresh(db, member.browser, clock)
    assert not _fresh(db, other.browser, clock)
    # Nor can the other member answer this member's challenge with their own passkey.
    csrf, started = _start(member.browser)
    forged = other.browser.authenticator.authenticate({**started["publicKey"], "allowCredentials": []})  # type: ignore[dict-item]
    refused = _answer(member.browser, csrf, started, forged, "/approvals")
    assert refused.status_code == 400
    assert refused.json()["error"] == "passkey_check_failed"
    other.browser.close()


def test_an_assertion_without_user_verification_grants_no_sudo(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    member.browser.authenticator.user_verified = False
    refused = _sudo(member.browser)
    assert refused.status_code == 400, refused.text
    assert not _fresh(db, member.browser, clock)


def test_a_sudo_answer_is_used_once(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    browser = member.browser
    csrf, started = _start(browser)
    answer = browser.authenticator.authenticate(started["publicKey"])  # type: ignore[arg-type]
    assert _answer(browser, csrf, started, answer, "/approvals").status_code == 200
    clock.advance(301)
    assert not _fresh(db, browser, clock)
    replayed = _answer(browser, csrf, started, answer, "/approvals")
    assert replayed.status_code == 400
    assert replayed.json()["error"] == "challenge_expired"
    assert not _fresh(db, browser, clock)


def test_a_sudo_step_up_cannot_be_spent_on_adding_a_passkey(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    browser = member.browser
    csrf, started = _start(browser)
    answer = browser.authenticator.authenticate(started["publicKey"])  # type: ignore[arg-type]
    crossed = browser.http.post(
        "/account/passkeys/step-up/verify",
        json={"csrf": csrf, "challengeId": started["challengeId"], "credential": answer},
    )
    assert crossed.status_code == 400
    assert crossed.json()["error"] == "challenge_expired"
    assert not _fresh(db, browser, clock)


@pytest.mark.parametrize(
    "given",
    ["//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "/%2F%2Fevil"],
)
def test_sudo_returns_only_to_a_path_on_this_site(
    server_on: RunningServer, member: Person, given: str
) -> None:
    page = member.browser.http.get("/account/sudo", params={"next": given})
    assert page.status_code == 200
    assert 'name="next" value="/admin"' in page.text
    done = _sudo(member.browser, given)
    assert done.json() == {"redirect": "/admin"}


def test_sudo_asks_a_visitor_to_sign_in_first(server_on: RunningServer) -> None:
    with SoftBrowser(server_on) as anonymous:
        answer = anonymous.get("/account/sudo?next=/approvals")
    assert answer.status_code == 302
    assert answer.headers["location"].startswith("/login?next=")


def _visit(server: RunningServer, browser: SoftBrowser, path: str, query: bytes = b"") -> Visit:
    """The visit a page handler gets for a POST to `path` from this browser."""
    secret = str(browser.http.cookies.get("pw_session"))
    with server.services.db.read() as session:
        signed_in = resolve_session(session, secret, now=server.services.clock.now())
    scope = {"type": "http", "method": "POST", "path": path, "query_string": query, "headers": []}
    return Visit(
        request=Request(scope),
        services=server.services,
        signed_in=signed_in,
        session_secret=secret,
        browser_secret=new_browser_secret(),
        new_browser_cookie=False,
    )


def test_a_page_handler_is_sent_to_sudo_and_back_until_it_is_fresh(
    server_on: RunningServer, member: Person, clock: FrozenClock
) -> None:
    visit = _visit(server_on, member.browser, "/agents/agt_1/policy")
    sent = anyio.run(partial(sudo_or_redirect, visit, next_path="/agents/agt_1?tab=policy"))
    assert sent is not None
    assert (sent.status_code, sent.headers["location"]) == (
        303,
        "/account/sudo?next=%2Fagents%2Fagt_1%3Ftab%3Dpolicy",
    )
    here = anyio.run(sudo_or_redirect, _visit(server_on, member.browser, "/agents/agt_1", b"tab=rules"))
    assert here is not None
    assert here.headers["location"] == "/account/sudo?next=%2Fagents%2Fagt_1%3Ftab%3Drules"
    off_site = anyio.run(partial(sudo_or_redirect, visit, next_path="//evil.example/"))
    assert off_site is not None
    assert off_site.headers["location"] == "/account/sudo?next=%2Fadmin"

    assert _sudo(member.browser).status_code == 200
    assert anyio.run(sudo_or_redirect, visit) is None
    clock.advance(301)
    assert anyio.run(sudo_or_redirect, visit) is not None


def test_a_sudo_confirmed_on_one_server_counts_on_another(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    """Two servers on one database, as two processes behind one name would be."""
    assert _sudo(member.browser).status_code == 200
    with serve(db.url, public_host="localhost", clock=clock) as other:
        cookie = str(member.browser.http.cookies.get("pw_session"))
        with httpx.Client(base_url=other.settings.pages_origin, cookies={"pw_session": cookie}) as there:
            assert "You confirmed recently" in there.get("/account/sudo?next=/approvals").text
            clock.advance(301)
            assert "You confirmed recently" not in there.get("/account/sudo?next=/approvals").text
