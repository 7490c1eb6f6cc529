"""A change made with an admin:write token that widens authority answers 202 and waits: it is made
only when an owner or admin of the organisation confirms it on its page with a user-verified
passkey whose challenge commits to that change, within ten minutes. Lowering never waits. Against a
real server, with a real (software) passkey, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlmodel import col, select

from auth.scopes import Scope
from auth.tokens import find_by_secret, issue_access_token
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AuditEvent
from server.vocabulary import Role
from tests.support.admin_api import call, problem
from tests.support.clocks import frozen_clock
from tests.support.oauth import Person, SoftBrowser, csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_member


@pytest.fixture
def clock() -> FrozenClock:
    return frozen_clock()


@pytest.fixture
def server(db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    extra = {"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}
    with serve(db.url, public_host="localhost", clock=clock, extra=extra) as running:
        yield running


@pytest.fixture
def owner(server: RunningServer, db: Database) -> Iterator[Person]:
    person = enrolled_person(server, db)
    yield person
    person.browser.close()


def _writer(db: Database, server: RunningServer, org_id: str, clock: FrozenClock) -> str:
    """An admin:write token issued on the server's (frozen) clock."""
    with db.write() as session:
        return issue_access_token(
            session,
            org_id=org_id,
            agent_id=None,
            scopes=frozenset({Scope.ADMIN_WRITE}),
            audience=server.settings.admin_api_audience,
            ttl_seconds=3600,
            created_by="test",
            now=clock.now(),
        ).token


@pytest.fixture
def writer(server: RunningServer, db: Database, owner: Person, clock: FrozenClock) -> str:
    return _writer(db, server, owner.agent.org_id, clock)


def _page_path(asked: httpx.Response) -> str:
    url = str(asked.json()["confirmationUrl"])
    return "/" + url.split("/", 3)[3]


def _confirm(browser: SoftBrowser, page: str) -> httpx.Response:
    return browser.ceremony(page, f"{page}/options", f"{page}/verify")


def _events(db: Database, kind: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(session.exec(select(AuditEvent).where(col(AuditEvent.type) == kind)).all())


def _policy(server: RunningServer, token: str, agent_id: str) -> dict[str, Any]:
    return dict(call(server, "get", f"/agents/{agent_id}/policy", token).json())


def test_a_raised_cap_waits_then_is_made_by_the_member_who_confirms(
    server: RunningServer, db: Database, owner: Person, writer: str, clock: FrozenClock
) -> None:
    agent_id = owner.agent.agent_id
    before = _policy(server, writer, agent_id)
    asked = call(server, "patch", f"/agents/{agent_id}/policy", writer, body={"dailyCapUsd": "250.00"})
    assert asked.status_code == 202, asked.text
    body = asked.json()
    assert body["status"] == "confirmation_required"
    assert asked.headers["location"] == body["confirmationUrl"]
    assert body["confirmationUrl"].startswith(f"{server.settings.pages_url}/account/changes/chg_")
    assert body["expiresAt"] == (clock.now() + timedelta(minutes=10)).isoformat().replace("+00:00", "Z")
    assert _policy(server, writer, agent_id) == before  # nothing changed yet
    assert call(server, "get", f"/changes/{body['changeId']}", writer).json()["status"] == "pending"

    page = owner.browser.get(_page_path(asked))
    assert page.status_code == 200
    assert "Most per day: 250.00 USD (now " in page.text
    done = _confirm(owner.browser, _page_path(asked))
    assert done.status_code == 200, done.text
    assert done.json() == {"redirect": f"{_page_path(asked)}?done=confirmed"}

    after = _policy(server, writer, agent_id)
    assert after["policy"]["dailyCapUsd"] == "250.00"
    assert after["policyVersion"] == before["policyVersion"] + 1
    state = call(server, "get", f"/changes/{body['changeId']}", writer).json()
    assert (state["status"], state["confirmedBy"]) == ("confirmed", owner.member_id)
    [confirmed] = _events(db, "change.confirmed")
    assert confirmed.actor == f"member:{owner.member_id}"
    assert confirmed.data["askedBy"].startswith("token:tok_")
    assert confirmed.data["changeId"] == body["changeId"]
    changed = _events(db, "policy.changed")[-1]
    assert changed.actor == f"member:{owner.member_id}"

    # Confirmed once: the same page cannot make it again.
    refused = owner.browser.http.post(
        f"{_page_path(asked)}/options", json={"csrf": csrf_of(owner.browser.get(_page_path(asked)).text)}
    )
    assert refused.status_code == 409
    assert refused.json()["error"] == "change_not_pending"


def test_a_token_asked_for_is_issued_on_confirming_and_shown_once(
    server: RunningServer, db: Database, owner: Person, writer: str
) -> None:
    tokens_path = f"/agents/{owner.agent.agent_id}/tokens"
    before = call(server, "get", tokens_path, writer).json()["tokens"]
    asked = call(server, "post", tokens_path, writer, body={"scopes": ["payments:read"], "label": "ci"})
    assert asked.status_code == 202, asked.text
    assert call(server, "get", tokens_path, writer).json()["tokens"] == before
    assert "Issue a new token for agent" in owner.browser.get(_page_path(asked)).text

    assert _confirm(owner.browser, _page_path(asked)).status_code == 200
    shown = owner.browser.get(_page_path(asked)).text
    secret = shown.split('<code class="secret">', 1)[1].split("</code>", 1)[0]
    assert secret.startswith("pw_at_")
    assert "pw_at_" not in owner.browser.get(_page_path(asked)).text  # once
    with db.read() as session:
        stored = find_by_secret(session, secret)
        assert stored is not None
        assert (stored.agent_id, stored.created_by, stored.label) == (
            owner.agent.agent_id,
            f"member:{owner.member_id}",
            "ci",
        )
        assert stored.scopes == "payments:read"
    assert len(call(server, "get", tokens_path, writer).json()["tokens"]) == len(before) + 1


def test_a_change_not_confirmed_in_ten_minutes_is_never_made(
    server: RunningServer, db: Database, owner: Person, writer: str, clock: FrozenClock
) -> None:
    agent_id = owner.agent.agent_id
    before = _policy(server, writer, agent_id)
    late = call(server, "patch", f"/agents/{agent_id}/policy", writer, body={"maxUsdPerTx": "9.00"})
    started_in_time = call(
        server, "patch", f"/agents/{agent_id}/policy", writer, body={"maxUsdPerTx": "8.00"}
    )
    page = _page_path(started_in_time)
    clock.advance(540)  # the passkey is asked for in the change's tenth minute, and answers after it
    csrf = csrf_of(owner.browser.get(page).text)
    started = owner.browser.http.post(f"{page}/options", json={"csrf": csrf}).json()
    answer = owner.browser.authenticator.authenticate(started["publicKey"])
    clock.advance(61)

    opened = owner.browser.get(_page_path(late))
    assert "This change ran out of time" in opened.text
    assert "data-passkey" not in opened.text
    assert call(server, "get", f"/changes/{late.json()['changeId']}", writer).json()["status"] == "expired"
    answered = owner.browser.http.post(
        f"{page}/verify", json={"csrf": csrf, "challengeId": started["challengeId"], "credential": answer}
    )
    assert answered.status_code == 409, answered.text
    assert answered.json()["error"] == "change_not_pending"
    assert _policy(server, writer, agent_id) == before
    assert _events(db, "change.confirmed") == []


def test_an_assertion_over_one_change_confirms_no_other(
    server: RunningServer, db: Database, owner: Person, writer: str
) -> None:
    agent_id = owner.agent.agent_id
    before = _policy(server, writer, agent_id)
    small = _page_path(
        call(server, "patch", f"/agents/{agent_id}/policy", writer, body={"dailyCapUsd": "11.00"})
    )
    large = _page_path(
        call(server, "patch", f"/agents/{agent_id}/policy", writer, body={"dailyCapUsd": "9999.00"})
    )
    csrf = csrf_of(owner.browser.get(small).text)
    started = owner.browser.http.post(f"{small}/options", json={"csrf": csrf}).json()
    answer = owner.browser.authenticator.authenticate(started["publicKey"])
    crossed = owner.browser.http.post(
        f"{large}/verify", json={"csrf": csrf, "challengeId": started["challengeId"], "credential": answer}
    )
    assert crossed.status_code == 400, crossed.text
    assert crossed.json()["error"] == "challenge_expired"
    assert _policy(server, writer, agent_id) == before


def test_another_organisation_and_a_viewer_cannot_confirm(
    server: RunningServer, db: Database, owner: Person, writer: str, clock: FrozenClock
) -> None:
    agent_id = owner.agent.agent_id
    before = _policy(server, writer, agent_id)
    page = _page_path(
        call(server, "patch", f"/agents/{agent_id}/policy", writer, body={"dailyCapUsd": "99.00"})
    )

    stranger = enrolled_person(server, db)  # an owner, of another organisation
    opened = stranger.browser.get(page)
    assert opened.status_code == 404
    assert "99.00" not in opened.text
    csrf = csrf_of(stranger.browser.get("/account/passkeys").text)
    refused = stranger.browser.http.post(f"{page}/options", json={"csrf": csrf})
    assert (refused.status_code, refused.json()["error"]) == (404, "change_not_found")
    other_writer = _writer(db, server, stranger.agent.org_id, clock)
    change_id = page.rsplit("/", 1)[1]
    problem(call(server, "get", f"/changes/{change_id}", other_writer), 404, "change_not_found")

    viewer = enrolled_person(server, db, role=Role.VIEWER, org_id=owner.agent.org_id)
    seen = viewer.browser.get(page)
    assert seen.status_code == 200
    assert "Only an owner or admin" in seen.text
    assert "data-passkey" not in seen.text
    csrf = csrf_of(seen.text)
    refused = viewer.browser.http.post(f"{page}/options", json={"csrf": csrf})
    assert (refused.status_code, refused.json()["error"]) == (403, "confirm_forbidden")
    assert _policy(server, writer, agent_id) == before
    stranger.browser.close()
    viewer.browser.close()


def test_lowering_and_demoting_never_wait_and_a_new_owner_needs_an_owner(
    server: RunningServer, db: Database, owner: Person, writer: str
) -> None:
    agent_id = owner.agent.agent_id
    before = _policy(server, writer, agent_id)
    lowered = call(server, "patch", f"/agents/{agent_id}/policy", writer, body={"dailyCapUsd": "0.10"})
    assert lowered.status_code == 200, lowered.text
    assert lowered.json()["policyVersion"] == before["policyVersion"] + 1
    disabled = call(server, "post", f"/agents/{agent_id}/disable", writer)
    assert disabled.status_code == 200

    helper = make_member(db, owner.agent.org_id, role=Role.ADMIN, email="helper@example.com")
    demoted = call(server, "patch", f"/members/{helper}", writer, body={"role": "approver"})
    assert (demoted.status_code, demoted.json()["role"]) == (200, "approver")

    admin = enrolled_person(server, db, role=Role.ADMIN, org_id=owner.agent.org_id)
    to_owner = _page_path(call(server, "patch", f"/members/{helper}", writer, body={"role": "owner"}))
    assert "Give helper@example.com the role owner" in admin.browser.get(to_owner).text
    csrf = csrf_of(admin.browser.get(to_owner).text)
    refused = admin.browser.http.post(f"{to_owner}/options", json={"csrf": csrf})
    assert (refused.status_code, refused.json()["error"]) == (403, "confirm_forbidden")
    assert _confirm(owner.browser, to_owner).status_code == 200
    roles = {m["email"]: m["role"] for m in call(server, "get", "/members", writer).json()["members"]}
    assert roles["helper@example.com"] == "owner"
    admin.browser.close()


def test_an_invitation_waits_and_its_enrolment_link_is_shown_once(
    server: RunningServer, db: Database, owner: Person, writer: str
) -> None:
    def emails() -> list[str]:
        return [m["email"] for m in call(server, "get", "/members", writer).json()["members"]]

    before = emails()
    asked = call(
        server, "post", "/members", writer, body={"email": "New.Person@Example.com", "role": "approver"}
    )
    assert asked.status_code == 202, asked.text
    assert emails() == before
    problem(call(server, "post", "/members", writer, body={"email": "not-an-email"}), 400, "invalid_input")
    page = _page_path(asked)
    assert "Invite new.person@example.com as approver" in owner.browser.get(page).text

    assert _confirm(owner.browser, page).status_code == 200
    assert sorted(emails()) == sorted([*before, "new.person@example.com"])
    shown = owner.browser.get(page).text
    link = shown.split('<code class="secret">', 1)[1].split("</code>", 1)[0]
    assert link.startswith(f"{server.settings.pages_url}/enroll/")
    assert "/enroll/" not in owner.browser.get(page).text  # once
    with SoftBrowser(server) as newcomer:
        newcomer.enroll(link.rsplit("/", 1)[1])
        assert "new.person@example.com" in newcomer.get("/admin").text
    again = call(server, "post", "/members", writer, body={"email": "new.person@example.com"})
    problem(again, 400, "name_taken")


def test_a_raised_rule_limit_and_a_removed_rule_wait_for_the_passkey(
    server: RunningServer, db: Database, owner: Person, writer: str
) -> None:
    org_id = owner.agent.org_id

    def in_force() -> dict[str, dict[str, Any]]:
        return {rule["id"]: rule for rule in call(server, "get", "/rules", writer).json()["rules"]}

    added = call(
        server,
        "post",
        "/rules",
        writer,
        body={"scope": "org", "scopeId": org_id, "kind": "limit", "limitUsd": "20", "window": "day"},
    )
    assert added.status_code == 201, added.text
    rule_id = added.json()["id"]
    raised = call(server, "patch", f"/rules/{rule_id}", writer, body={"limitUsd": "50"})
    assert raised.status_code == 202, raised.text
    assert in_force()[rule_id]["limitUsd"] == "20.00"
    page = _page_path(raised)
    text = owner.browser.get(page).text
    assert f"Raise the limit of rule {rule_id}" in text
    assert "Limit: 50.00 USD per day (now 20.00 USD)" in text
    assert _confirm(owner.browser, page).status_code == 200
    assert (in_force()[rule_id]["limitUsd"], in_force()[rule_id]["version"]) == ("50.00", 2)
    changed = _events(db, "policy.rule_changed")[-1]
    assert changed.actor == f"member:{owner.member_id}"

    removing = call(server, "delete", f"/rules/{rule_id}", writer)
    assert removing.status_code == 202, removing.text
    assert rule_id in in_force()
    page = _page_path(removing)
    assert f"Remove rule {rule_id}" in owner.browser.get(page).text
    assert _confirm(owner.browser, page).status_code == 200
    assert rule_id not in in_force()
    assert _events(db, "policy.rule_removed")[-1].actor == f"member:{owner.member_id}"
    problem(call(server, "delete", f"/rules/{rule_id}", writer), 404, "rule_not_found")
