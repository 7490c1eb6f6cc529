"""/admin/audit without a browser: the chain's verification at the top, each approval decision
with the member and the passkey behind it, filters by kind, agent, member and dates, paging by
cursor, and a bad filter refused with a sentence."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.tenancy.service import find_org, set_approval_ttl
from server.vocabulary import Role
from server.web.pages import audit_log
from tests.support.audit import drop_append_only_triggers
from tests.support.ledger import facts, reserve_now
from tests.support.oauth import Person, SoftBrowser, csrf_of
from tests.support.org_pages import clock, colleague, member_row, owner, server, text_of
from tests.support.paywarden import RunningServer
from tests.support.principals import OPERATOR

__all__ = ["clock", "owner", "server"]  # fixtures
PAGE = "/admin/audit"


def _approve(db: Database, person: Person, clock: FrozenClock, key: str) -> str:
    """Hold a payment of the person's agent, and approve it on its page with their passkey."""
    held = reserve_now(db, person.agent.agent_id, facts(key), clock.now())
    assert held.approval is not None, held
    approval_id = held.approval.id
    browser: SoftBrowser = person.browser
    csrf = csrf_of(browser.get(f"/approvals/{approval_id}").text)
    started = browser.http.post(
        f"/approvals/{approval_id}/options", json={"csrf": csrf, "decision": "approve"}
    )
    body: dict[str, Any] = started.json()
    answer = browser.authenticator.authenticate(body["publicKey"])
    verified = browser.http.post(
        f"/approvals/{approval_id}/verify",
        json={"csrf": csrf, "decision": "approve", "challengeId": body["challengeId"], "credential": answer},
    )
    assert verified.status_code == 200, verified.text
    return approval_id


def _ttl_changes(db: Database, org_id: str, count: int, clock: FrozenClock) -> None:
    with db.write() as session:
        org = find_org(session, OPERATOR, org_id)
        for index in range(count):
            set_approval_ttl(session, org=org, seconds=600 + index, actor="operator:test", now=clock.now())


def test_a_decision_shows_the_member_and_passkey_behind_it(
    server: RunningServer, sqlite_db: Database, owner: Person, clock: FrozenClock
) -> None:
    _approve(sqlite_db, owner, clock, "audit-page-1")
    shown = owner.browser.get(f"{PAGE}?kind=approval.")
    assert shown.status_code == 200
    page = text_of(shown)
    assert "The log verifies" in page
    email = member_row(sqlite_db, owner.agent.org_id, owner.member_id).email
    assert "approval.approved" in page
    assert f"By {email}" in page
    assert "With the passkey Soft key (credential " in page
    assert "payment.held" not in page  # filtered by kind


def test_filters_by_agent_member_and_dates(
    server: RunningServer, sqlite_db: Database, owner: Person, clock: FrozenClock
) -> None:
    viewer = colleague(server, sqlite_db, owner, Role.VIEWER)
    _approve(sqlite_db, owner, clock, "audit-page-2")
    viewer.browser.http.cookies.clear()
    viewer.browser.sign_in()
    by_member = text_of(owner.browser.get(f"{PAGE}?member={viewer.member_id}"))
    assert "passkey.added" in by_member
    assert "member.signed_in" in by_member
    assert "approval.approved" not in by_member
    assert "selected>" in owner.browser.get(f"{PAGE}?member={viewer.member_id}").text
    by_agent = text_of(owner.browser.get(f"{PAGE}?agent={owner.agent.agent_id}"))
    assert "payment.held" in by_agent
    assert "passkey.added" not in by_agent
    today = clock.now().date()  # the server's clock, which decided the approval
    decisions = f"{PAGE}?kind=approval."
    assert "approval.approved" in text_of(owner.browser.get(f"{decisions}&since={today}&until={today}"))
    yesterday = today - timedelta(days=1)
    assert "No event matches these filters." in text_of(owner.browser.get(f"{decisions}&until={yesterday}"))
    tomorrow = today + timedelta(days=1)
    assert "No event matches these filters." in text_of(owner.browser.get(f"{decisions}&since={tomorrow}"))
    viewer.browser.close()


def test_pages_follow_the_cursor(
    server: RunningServer, sqlite_db: Database, owner: Person, clock: FrozenClock
) -> None:
    _ttl_changes(sqlite_db, owner.agent.org_id, audit_log.PAGE + 5, clock)
    first = owner.browser.get(f"{PAGE}?kind=org.changed")
    seqs = [int(seq) for seq in re.findall(r"#(\d+),", first.text)]
    assert len(seqs) == audit_log.PAGE
    assert seqs == sorted(seqs, reverse=True)
    older = re.search(r'href="/admin/audit\?([^"]+)">Older events', first.text)
    assert older is not None
    second = owner.browser.get(f"{PAGE}?{older.group(1).replace('&amp;', '&')}")
    rest = [int(seq) for seq in re.findall(r"#(\d+),", second.text)]
    assert len(rest) == 5
    assert max(rest) < min(seqs)
    assert "Older events" not in second.text
    assert "Newest events" in second.text


def test_a_bad_filter_is_refused_with_a_sentence(server: RunningServer, owner: Person) -> None:
    for query in ("since=yesterday", "before=abc", "kind=<script>", f"agent={'a' * 41}"):
        answer = owner.browser.get(f"{PAGE}?{query}")
        assert answer.status_code == 400, query
        assert "The audit log is filtered by a kind such as member.disabled" in text_of(answer)


def test_a_changed_event_is_reported_at_the_top(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    with sqlite_db.write() as session:
        drop_append_only_triggers(session)
        session.execute(
            text("UPDATE audit_events SET actor = 'member:someone-else' WHERE org_id = :org AND seq = 1"),
            {"org": owner.agent.org_id},
        )
    shown = text_of(owner.browser.get(PAGE))
    state = re.search(r'id="chain-state">(.*?)</div>', shown, re.S)
    assert state is not None
    assert "The log does not verify at event 1: an event was changed after it was written." in re.sub(
        r"<[^>]+>", "", state.group(1)
    )
