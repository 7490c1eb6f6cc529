"""Members' pages without a browser: enrolment links, passkey sign-in and its refusals, sessions
and their cookie, the passkeys page (add, rename, remove, never the last), and pages that move to
the host passkeys work on."""

from __future__ import annotations

import html

import httpx
from sqlmodel import select

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AuditEvent
from tests.support.oauth import Person, SoftBrowser, csrf_of, enrolled_person, enrollment_link_token
from tests.support.paywarden import RunningServer, serve
from tests.support.soft_authenticator import SoftAuthenticator
from tests.support.tenants import make_agent, make_member


def _text(response: httpx.Response) -> str:
    return html.unescape(response.text)


def test_an_enrolment_link_works_once(server: RunningServer, sqlite_db: Database) -> None:
    agent = make_agent(sqlite_db, server.settings, allow_hosts=[], clock=server.clock)
    member_id = make_member(sqlite_db, agent.org_id, role="owner", clock=server.clock)
    token = enrollment_link_token(sqlite_db, member_id, agent.org_id, clock=server.clock)
    with SoftBrowser(server) as browser:
        welcome = browser.get(f"/enroll/{token}")
        assert welcome.status_code == 200
        assert "Create your passkey" in welcome.text
        done = browser.enroll(token)
        assert done.json() == {"redirect": "/admin?welcome=1"}
        assert "Your passkey is ready, and you are signed in." in browser.get("/admin?welcome=1").text
        again = browser.get(f"/enroll/{token}")
    assert again.status_code == 410
    assert "This enrolment link has expired or has already been used." in _text(again)


def test_an_expired_enrolment_link_is_refused(
    server: RunningServer, sqlite_db: Database, clock: FrozenClock
) -> None:
    agent = make_agent(sqlite_db, server.settings, allow_hosts=[], clock=server.clock)
    member_id = make_member(sqlite_db, agent.org_id, role="owner", clock=server.clock)
    token = enrollment_link_token(sqlite_db, member_id, agent.org_id, clock=server.clock)
    clock.advance(7 * 24 * 3600 + 1)
    with SoftBrowser(server) as browser:
        assert browser.get(f"/enroll/{token}").status_code == 410
        assert browser.get("/enroll/pw_en_not-a-real-token").status_code == 410


def test_a_member_signs_in_again_with_their_passkey(server: RunningServer, owner: Person) -> None:
    owner.browser.http.cookies.clear()
    assert owner.browser.get("/admin").headers["location"] == "/login?next=%2Fadmin"
    signed_in = owner.browser.sign_in("/connections")
    assert signed_in.json() == {"redirect": "/connections"}
    cookie = signed_in.headers["set-cookie"]
    assert "pw_session=" in cookie
    assert "HttpOnly" in cookie
    assert "SameSite=lax" in cookie or "samesite=lax" in cookie.lower()
    assert "Secure" not in cookie  # http://localhost: a Secure cookie would not come back
    assert owner.browser.get("/connections").status_code == 200


def test_a_sign_in_never_sends_anyone_to_another_site(server: RunningServer, owner: Person) -> None:
    for target in ("https://evil.example/", "//evil.example/", "/\\evil.example"):
        owner.browser.http.cookies.clear()
        answer = owner.browser.ceremony("/login", "/login/options", "/login/verify", next=target)
        assert answer.json() == {"redirect": "/admin"}


def test_an_unknown_passkey_is_refused(server: RunningServer) -> None:
    with SoftBrowser(server) as stranger:
        stranger.authenticator.register(
            {
                "rp": {"id": "localhost", "name": "x"},
                "user": {"id": "c3RyYW5nZXI", "name": "s"},
                "challenge": "AAAA",
                "pubKeyCredParams": [{"type": "public-key", "alg": -7}],
            }
        )
        answer = stranger.sign_in()
    assert answer.status_code == 400
    assert answer.json()["error"] == "passkey_not_recognised"
    assert answer.json()["message"].startswith("This passkey is not registered with Paywarden.")


def test_a_challenge_is_answered_once(server: RunningServer, owner: Person) -> None:
    browser = owner.browser
    browser.http.cookies.clear()
    csrf = csrf_of(browser.get("/login").text)
    started = browser.http.post("/login/options", json={"csrf": csrf}).json()
    answer = browser.authenticator.authenticate(started["publicKey"])
    body = {"csrf": csrf, "challengeId": started["challengeId"], "credential": answer}
    assert browser.http.post("/login/verify", json=body).status_code == 200
    browser.http.cookies.delete("pw_session")  # signed out again, same browser: its CSRF token holds
    replay = browser.http.post("/login/verify", json=body)
    assert replay.status_code == 400
    assert (
        replay.json()["message"]
        == "This passkey request took too long or was already used. Please try again."
    )


def test_a_failed_answer_still_uses_up_its_challenge(server: RunningServer, owner: Person) -> None:
    browser = owner.browser
    browser.http.cookies.clear()
    csrf = csrf_of(browser.get("/login").text)
    started = browser.http.post("/login/options", json={"csrf": csrf}).json()
    answer = browser.authenticator.authenticate(started["publicKey"])
    tampered = {
        **answer,
        "response": {**answer["response"], "signature": answer["response"]["signature"][:-4] + "AAAA"},
    }
    body = {"csrf": csrf, "challengeId": started["challengeId"], "credential": tampered}
    failed = browser.http.post("/login/verify", json=body)
    assert failed.json()["error"] == "passkey_check_failed"
    body["credential"] = answer
    assert browser.http.post("/login/verify", json=body).json()["error"] == "challenge_expired"


def test_sign_in_without_the_pages_csrf_token_is_refused(server: RunningServer) -> None:
    with SoftBrowser(server) as browser:
        browser.get("/login")
        for forged in ("forged", "ünïcode…", "\u0000"):
            refused = browser.http.post("/login/options", json={"csrf": forged})
            assert refused.status_code == 403, forged
            assert refused.json()["error"] == "csrf_failed"


def test_sign_in_is_rate_limited(sqlite_db: Database) -> None:
    with (
        serve(sqlite_db.url, public_host="localhost", extra={"PAYWARDEN_RATE_LIMIT_SIGN_IN": "2"}) as limited,
        SoftBrowser(limited) as browser,
    ):
        csrf = csrf_of(browser.get("/login").text)
        answers = [browser.http.post("/login/options", json={"csrf": csrf}) for _ in range(3)]
    assert [answer.status_code for answer in answers] == [200, 200, 429]
    assert answers[2].json()["message"] == (
        "Too many requests came from here in a short time. Wait a minute and try again."
    )
    assert int(answers[2].headers["retry-after"]) >= 1


def test_signing_out_ends_the_session(server: RunningServer, owner: Person) -> None:
    browser = owner.browser
    session_cookie = browser.http.cookies.get("pw_session")
    page = browser.get("/logout")
    done = browser.http.post("/logout", data={"csrf": csrf_of(page.text)})
    assert done.headers["location"] == "/login?signed_out=1"
    assert "You are signed out." in browser.get("/login?signed_out=1").text
    with httpx.Client(
        base_url=server.settings.pages_origin, cookies={"pw_session": str(session_cookie)}
    ) as old:
        assert old.get("/admin").status_code == 302


def test_a_member_adds_renames_and_removes_passkeys_but_never_the_last(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    browser = owner.browser
    page = browser.get("/account/passkeys")
    assert "This is your only passkey, so it cannot be removed." in _text(page)
    only = page.text.split('action="/account/passkeys/')[1].split("/")[0]
    refused = browser.http.post(f"/account/passkeys/{only}/remove", data={"csrf": csrf_of(page.text)})
    assert refused.status_code == 409
    assert "This is your only passkey, so it cannot be removed. Add another passkey first." in _text(refused)

    first_device = browser.authenticator
    second_device = SoftAuthenticator(server.settings.pages_origin)
    added = browser.add_passkey(second_device, name="Phone")
    assert added.json() == {"redirect": "/account/passkeys?done=added"}
    page = browser.get("/account/passkeys?done=added")
    assert "Your new passkey is ready." in page.text
    assert '<h2 class="card-title">Phone</h2>' in page.text

    renamed = browser.http.post(
        f"/account/passkeys/{only}/rename", data={"csrf": csrf_of(page.text), "name": "Laptop"}
    )
    assert renamed.headers["location"] == "/account/passkeys?done=renamed"
    blank = browser.http.post(
        f"/account/passkeys/{only}/rename", data={"csrf": csrf_of(page.text), "name": "  "}
    )
    assert "Give the passkey a name of 1 to 60 characters." in _text(blank)
    no_csrf = browser.http.post(f"/account/passkeys/{only}/rename", data={"name": "Sneaky"})
    assert no_csrf.status_code == 403

    removed = browser.http.post(f"/account/passkeys/{only}/remove", data={"csrf": csrf_of(page.text)})
    # This browser signed in (enrolled) with the removed passkey, so its session ended with it.
    assert removed.headers["location"] == "/login?signed_out=passkey_removed"
    assert "The passkey was removed. You had signed in with it here" in _text(
        browser.get("/login?signed_out=passkey_removed")
    )
    assert browser.get("/account/passkeys").status_code == 302
    # The removed passkey no longer signs in; the new one does.
    browser.http.cookies.clear()
    browser.authenticator = first_device
    assert browser.sign_in().json()["error"] == "passkey_not_recognised"
    browser.authenticator = second_device
    assert browser.sign_in().json() == {"redirect": "/admin"}
    with sqlite_db.read() as session:
        types = [event.type for event in session.exec(select(AuditEvent)).all()]
    assert {"passkey.added", "passkey.renamed", "passkey.removed", "member.signed_in"} <= set(types)


def test_another_members_passkey_cannot_be_touched(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    other = enrolled_person(server, sqlite_db, org_id=owner.agent.org_id)
    page = other.browser.get("/account/passkeys")
    theirs = page.text.split('action="/account/passkeys/')[1].split("/")[0]
    mine = owner.browser.get("/account/passkeys")
    attempt = owner.browser.http.post(
        f"/account/passkeys/{theirs}/rename", data={"csrf": csrf_of(mine.text), "name": "Mine now"}
    )
    assert attempt.status_code == 404
    assert "That passkey does not exist, or it is not one of yours." in _text(attempt)
    other.browser.close()


def test_pages_move_to_the_host_passkeys_work_on(sqlite_db: Database) -> None:
    with serve(sqlite_db.url) as loopback:  # public URL http://127.0.0.1:PORT
        answer = httpx.get(f"{loopback.base_url}/login?next=%2Fadmin")
        assert answer.status_code == 302
        assert answer.headers["location"] == f"http://localhost:{loopback.port}/login?next=%2Fadmin"
        follow = httpx.get(answer.headers["location"])
        assert follow.status_code == 200
        assert loopback.settings.rp_id == "localhost"


def test_a_page_that_needs_a_session_sends_you_to_sign_in(server: RunningServer) -> None:
    for path in ("/admin", "/connections", "/account/passkeys"):
        answer = httpx.get(server.public_url + path)
        assert answer.status_code == 302
        assert answer.headers["location"].startswith("/login?next=")
    root = httpx.get(server.public_url + "/")
    assert root.headers["location"] == "/admin"


def test_cookies_are_secure_on_https(sqlite_db: Database) -> None:
    from starlette.testclient import TestClient

    from server.app import create_app
    from tests.support.paywarden import settings_for

    settings = settings_for(
        database_url=sqlite_db.url, port=443, extra={"PAYWARDEN_PUBLIC_URL": "https://pay.example.com"}
    )
    assert settings.secure_cookies
    with TestClient(create_app(settings), base_url="https://pay.example.com") as client:
        page = client.get("/login")
    assert page.status_code == 200
    cookie = page.headers["set-cookie"]
    assert cookie.startswith("pw_browser=")
    assert "Secure" in cookie
    assert "HttpOnly" in cookie
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    assert page.headers["x-frame-options"] == "DENY"


def test_a_session_expires_and_housekeeping_forgets_it(
    server: RunningServer, owner: Person, sqlite_db: Database, clock: FrozenClock
) -> None:
    from auth.housekeeping import IdentityHousekeeping
    from server.models import WebAuthnChallenge, WebSession

    assert owner.browser.get("/admin").status_code == 200
    clock.advance(server.settings.session_ttl + 1)
    assert owner.browser.get("/admin").status_code == 302
    with sqlite_db.read() as session:
        assert session.exec(select(WebSession)).all()
        assert session.exec(select(WebAuthnChallenge)).all()
    assert IdentityHousekeeping(db=sqlite_db, clock=clock).purge() > 0
    with sqlite_db.read() as session:
        assert session.exec(select(WebSession)).all() == []
        assert session.exec(select(WebAuthnChallenge)).all() == []


def test_an_unknown_address_is_a_page_with_a_sentence(server: RunningServer) -> None:
    page = httpx.get(f"{server.public_url}/no/such/page", headers={"Accept": "text/html"})
    assert page.status_code == 404
    assert "There is no page at this address." in page.text
    assert page.headers["x-frame-options"] == "DENY"
    api = httpx.get(f"{server.public_url}/no/such/page", headers={"Accept": "application/json"})
    assert api.status_code == 404
    assert api.json()["error"] == "page_not_found"
    wrong_method = httpx.get(f"{server.public_url}/oauth/token", headers={"Accept": "text/html"})
    assert wrong_method.status_code == 405
