"""A session is not a passkey: adding a passkey needs a fresh step-up by one of the member's own
passkeys (bound to the member and the session, answered once, redeemed once, two minutes), and a
session ends with the passkey it was signed in with, with the membership, or everywhere at once.
Every passkey added or removed is an audit event and a Slack message. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlmodel import col, select

from server.approvals.notifications import ApprovalNotifier
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AuditEvent, Member, MemberPasskey
from tests.support.oauth import Person, SoftBrowser, csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve
from tests.support.soft_authenticator import SoftAuthenticator
from tests.support.webhook_receiver import WebhookReceiver


@pytest.fixture
def server_on(db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(db.url, public_host="localhost", clock=clock) as running:
        yield running


@pytest.fixture
def member(server_on: RunningServer, db: Database) -> Iterator[Person]:
    person = enrolled_person(server_on, db)
    yield person
    person.browser.close()


def _copy_of(server: RunningServer, db: Database, victim: Person) -> Person:
    """Another member of the victim's organisation, in their own browser with their own registered
    passkey, who has put a copy of the victim's session cookie in that browser."""
    thief = enrolled_person(server, db, org_id=victim.agent.org_id)
    thief.browser.http.cookies.delete("pw_session")
    thief.browser.http.cookies.set("pw_session", str(victim.browser.http.cookies.get("pw_session")))
    return thief


def _options(browser: SoftBrowser, csrf: str, **extra: object) -> httpx.Response:
    return browser.http.post("/account/passkeys/options", json={"csrf": csrf, **extra})


def test_a_session_alone_cannot_start_adding_a_passkey(server_on: RunningServer, member: Person) -> None:
    csrf = csrf_of(member.browser.get("/account/passkeys").text)
    for extra in ({}, {"stepUpId": "stp_made_up"}, {"stepUpId": 7}):
        refused = _options(member.browser, csrf, **extra)
        assert refused.status_code == 403
        assert refused.json()["error"] == "step_up_required"
        assert refused.json()["message"].startswith("Adding a passkey needs a fresh check")


def test_a_copied_cookie_cannot_add_the_copiers_passkey(
    server_on: RunningServer, member: Person, db: Database
) -> None:
    copier = _copy_of(server_on, db, member)
    thief = copier.browser
    page = thief.get("/account/passkeys")
    assert page.status_code == 200  # the cookie alone opens the victim's page...
    assert member.browser.http.cookies.get("pw_session") == thief.http.cookies.get("pw_session")
    csrf = csrf_of(page.text)
    assert _options(thief, csrf).json()["error"] == "step_up_required"
    # ...but the step-up asks for the victim's own passkeys, and the copier's passkey (a real
    # one, registered to the copier) does not count.
    started = thief.http.post("/account/passkeys/step-up/options", json={"csrf": csrf}).json()
    allowed = [item["id"] for item in started["publicKey"]["allowCredentials"]]
    assert allowed == [member.browser.authenticator.credentials[0].id]
    forged = thief.authenticator.authenticate({**started["publicKey"], "allowCredentials": []})
    answer = thief.http.post(
        "/account/passkeys/step-up/verify",
        json={"csrf": csrf, "challengeId": started["challengeId"], "credential": forged},
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "passkey_check_failed"
    assert _options(thief, csrf, stepUpId=started["challengeId"]).json()["error"] == "step_up_required"
    with db.read() as session:
        owners = [row.member_id for row in session.exec(select(MemberPasskey)).all()]
    assert sorted(owners) == sorted([member.member_id, copier.member_id])
    thief.close()


def test_the_owner_steps_up_and_adds_a_passkey(
    server_on: RunningServer, member: Person, db: Database
) -> None:
    added = member.browser.add_passkey(SoftAuthenticator(server_on.settings.pages_origin), name="Phone")
    assert added.json() == {"redirect": "/account/passkeys?done=added"}
    with db.read() as session:
        assert len(session.exec(select(MemberPasskey)).all()) == 2
        types = [event.type for event in session.exec(select(AuditEvent)).all()]
    assert "member.stepped_up" in types
    assert types.count("passkey.added") == 2  # the enrolment, then this one


def test_a_step_up_is_used_once_in_its_own_session_within_two_minutes(
    server_on: RunningServer, member: Person, clock: FrozenClock
) -> None:
    browser = member.browser
    csrf = csrf_of(browser.get("/account/passkeys").text)
    step_up_id = browser.step_up(csrf).json()["stepUpId"]

    # Another session of the same member (same passkey, another browser) cannot spend it.
    with SoftBrowser(server_on) as elsewhere:
        elsewhere.authenticator = browser.authenticator
        assert elsewhere.sign_in().status_code == 200
        other_csrf = csrf_of(elsewhere.get("/account/passkeys").text)
        assert _options(elsewhere, other_csrf, stepUpId=step_up_id).json()["error"] == "step_up_required"

    assert _options(browser, csrf, stepUpId=step_up_id).status_code == 200
    assert _options(browser, csrf, stepUpId=step_up_id).json()["error"] == "step_up_required"

    late = browser.step_up(csrf).json()["stepUpId"]
    clock.advance(121)
    assert _options(browser, csrf, stepUpId=late).json()["error"] == "step_up_required"


def test_a_step_up_challenge_is_answered_once(server_on: RunningServer, member: Person) -> None:
    browser = member.browser
    csrf = csrf_of(browser.get("/account/passkeys").text)
    started = browser.http.post("/account/passkeys/step-up/options", json={"csrf": csrf}).json()
    answer = browser.authenticator.authenticate(started["publicKey"])
    body = {"csrf": csrf, "challengeId": started["challengeId"], "credential": answer}
    assert browser.http.post("/account/passkeys/step-up/verify", json=body).status_code == 200
    replay = browser.http.post("/account/passkeys/step-up/verify", json=body)
    assert replay.json()["error"] == "challenge_expired"


def test_removing_a_passkey_ends_the_sessions_signed_in_with_it(
    server_on: RunningServer, member: Person, db: Database
) -> None:
    laptop = member.browser.authenticator
    phone = SoftAuthenticator(server_on.settings.pages_origin)
    member.browser.add_passkey(phone, name="Phone")
    member.browser.authenticator = laptop
    with SoftBrowser(server_on) as on_phone:
        on_phone.authenticator = phone
        assert on_phone.sign_in().status_code == 200
        assert on_phone.get("/admin").status_code == 200
        with db.read() as session:
            phone_key = session.exec(select(MemberPasskey).where(MemberPasskey.name == "Phone")).one()
        page = member.browser.get("/account/passkeys")
        removed = member.browser.http.post(
            f"/account/passkeys/{phone_key.id}/remove", data={"csrf": csrf_of(page.text)}
        )
        assert removed.status_code == 303
        assert on_phone.get("/admin").headers["location"] == "/login?next=%2Fadmin"
        assert member.browser.get("/admin").status_code == 200  # signed in with the laptop's


def test_a_session_ends_when_its_passkey_is_gone_or_its_member_is_disabled(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    second = enrolled_person(server_on, db, org_id=member.agent.org_id)
    with db.write() as session:
        # A passkey deleted by other means than the page (an operator, a restore) also ends it.
        for passkey in session.exec(select(MemberPasskey).where(MemberPasskey.member_id == second.member_id)):
            session.delete(passkey)
        disabled = session.get(Member, member.member_id)
        assert disabled is not None
        disabled.disabled_at = clock.now()
        session.add(disabled)
    assert member.browser.get("/admin").status_code == 302
    assert second.browser.get("/admin").status_code == 302
    second.browser.close()


def test_sign_out_everywhere_ends_every_session_of_the_member(
    server_on: RunningServer, member: Person, db: Database
) -> None:
    other = enrolled_person(server_on, db, org_id=member.agent.org_id)
    with SoftBrowser(server_on) as elsewhere:
        elsewhere.authenticator = member.browser.authenticator
        assert elsewhere.sign_in().status_code == 200
        page = member.browser.get("/account/passkeys")
        assert "Sign out everywhere" in page.text
        assert member.browser.http.post("/account/sign-out-everywhere", data={}).status_code == 403
        done = member.browser.http.post("/account/sign-out-everywhere", data={"csrf": csrf_of(page.text)})
        assert done.headers["location"] == "/login?signed_out=everywhere"
        assert 'pw_session=""' in done.headers["set-cookie"] or "Max-Age=0" in done.headers["set-cookie"]
        assert elsewhere.get("/admin").status_code == 302
        assert member.browser.get("/admin").status_code == 302
    assert other.browser.get("/admin").status_code == 200  # another member is not signed out
    other.browser.close()


@pytest.mark.anyio
async def test_every_passkey_added_or_removed_is_audited_and_told_to_slack(
    server_on: RunningServer, member: Person, db: Database, clock: FrozenClock
) -> None:
    phone = SoftAuthenticator(server_on.settings.pages_origin)
    member.browser.add_passkey(phone, name="Phone <https://evil.example|click>")
    with db.read() as session:
        phone_key = session.exec(
            select(MemberPasskey).where(col(MemberPasskey.name).startswith("Phone"))
        ).one()
        owner = session.get(Member, member.member_id)
        assert owner is not None
        email = owner.email
    page = member.browser.get("/account/passkeys")
    member.browser.http.post(f"/account/passkeys/{phone_key.id}/remove", data={"csrf": csrf_of(page.text)})
    with db.read() as session:
        events = session.exec(
            select(AuditEvent)
            .where(col(AuditEvent.type).startswith("passkey."))
            .order_by(col(AuditEvent.seq))
        ).all()
    assert [(event.type, event.data["memberId"]) for event in events] == [
        ("passkey.added", member.member_id),
        ("passkey.added", member.member_id),
        ("passkey.removed", member.member_id),
    ]

    with WebhookReceiver() as receiver:
        notifier = ApprovalNotifier(
            db=db, clock=clock, webhook_url=receiver.url, public_url="https://paywarden.example.com"
        )
        assert await notifier.run_once() == 3
        assert await notifier.run_once() == 0  # each change is told once
        texts = receiver.texts
    assert texts[0].startswith(f"A passkey was added for {email}: ")
    assert "(with an enrolment link)" in texts[0]
    assert texts[1].startswith(
        f"A passkey was added for {email}: Phone &lt;https://evil.example|click&gt; "
        "(after a check with an existing passkey)."
    )
    assert texts[2].startswith(f"A passkey was removed from {email}: Phone &lt;")
    assert all(message["mrkdwn"] is False for message in receiver.messages)
