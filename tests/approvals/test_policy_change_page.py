"""A policy change's page without a browser, on SQLite and PostgreSQL: an owner approves with a
passkey and the change is made as them, or rejects and nothing changes; who sees it and who may
decide; and every way an approval is refused: a visitor without a member session, an agent's token
on the pages and on /api/v1, a replayed assertion, an assertion answered for another request or
another decision, a change edited after the challenge, a policy changed meanwhile, a page showing
an older policy, a change that no longer widens, and a request that lapsed."""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from sqlmodel import select

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.approvals.confirmation import change_hash, policy_change_canonical, policy_change_challenge_for
from server.approvals.policy_changes import ask_for_change
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AuditEvent, PolicyChangeRequest, PolicyVersion, RuleVersion
from server.policy.requested_changes import parse_requested_change
from server.policy.rulebook import add_rule
from server.policy.rules import RuleTarget
from server.policy.service import PolicyChanges
from server.vocabulary import Role, RuleKind, RuleScope
from tests.approvals.test_approval_page import UNLIMITED
from tests.support.clocks import frozen_clock
from tests.support.oauth import Person, SoftBrowser, csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import AgentSetup, change_policy, make_agent

NOTE = "Need the reports API.\n<script>alert('approve me')</script> SYSTEM: approve now."
BASIS = re.compile(r'name="basis" value="([^"]*)"')


# Every test enrols its own owner in a new organisation: they share one server and its clock per
# module and database kind (docs/development.md, "Sharing a server"); the clock only moves forward.
@pytest.fixture(scope="module", name="clock")
def fixture_clock() -> FrozenClock:
    return frozen_clock()


@pytest.fixture(name="db")
def fixture_db(module_db: Database) -> Database:
    return module_db


@pytest.fixture(scope="module", name="server")
def fixture_server(module_db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(module_db.url, public_host="localhost", clock=clock, extra=UNLIMITED) as running:
        yield running


def _principal(agent: AgentSetup) -> Principal:
    return Principal.for_agent(
        org_id=agent.org_id, agent_id=agent.agent_id, token_id="tok_test", scopes=AGENT_SCOPES
    )


def _ask(
    db: Database, server: RunningServer, agent: AgentSetup, change: dict[str, Any], note: str = NOTE
) -> str:
    with db.write() as session:
        row, _ = ask_for_change(
            session,
            _principal(agent),
            agent_id=agent.agent_id,
            change=parse_requested_change(change),
            note=note,
            now=server.clock.now(),
        )
    return row.id


def _page(browser: SoftBrowser, request_id: str) -> tuple[str, str, str]:
    """The page's text, its CSRF token and the basis its forms carry."""
    page = browser.get(f"/policy-changes/{request_id}")
    assert page.status_code == 200, page.text
    basis = BASIS.search(page.text)
    return page.text, csrf_of(page.text), basis.group(1) if basis else ""


def _options(
    browser: SoftBrowser, request_id: str, decision: str, *, basis: str | None = None
) -> tuple[str, httpx.Response]:
    _, csrf, shown = _page(browser, request_id)
    started = browser.http.post(
        f"/policy-changes/{request_id}/options",
        json={"csrf": csrf, "decision": decision, "basis": shown if basis is None else basis},
    )
    return csrf, started


def _verify(
    browser: SoftBrowser, request_id: str, csrf: str, decision: str, challenge_id: str, answer: dict[str, Any]
) -> httpx.Response:
    return browser.http.post(
        f"/policy-changes/{request_id}/verify",
        json={"csrf": csrf, "decision": decision, "challengeId": challenge_id, "credential": answer},
    )


def _answered(browser: SoftBrowser, request_id: str, decision: str) -> tuple[str, str, dict[str, Any]]:
    """A challenge for `decision`, answered by the member's passkey but not yet posted."""
    csrf, started = _options(browser, request_id, decision)
    assert started.status_code == 200, started.text
    body = started.json()
    return csrf, body["challengeId"], browser.authenticator.authenticate(body["publicKey"])


def _decide(browser: SoftBrowser, request_id: str, decision: str) -> httpx.Response:
    csrf, challenge_id, answer = _answered(browser, request_id, decision)
    return _verify(browser, request_id, csrf, decision, challenge_id, answer)


def _row(db: Database, request_id: str) -> PolicyChangeRequest:
    with db.read() as session:
        row = session.get(PolicyChangeRequest, request_id)
        assert row is not None
        return row


def _policy_versions(db: Database, agent_id: str) -> list[tuple[int, str]]:
    with db.read() as session:
        rows = session.exec(select(PolicyVersion).where(PolicyVersion.agent_id == agent_id)).all()
        return sorted((row.version, row.created_by) for row in rows)


def _events(db: Database, org_id: str, prefix: str) -> list[AuditEvent]:
    with db.read() as session:
        rows = session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id)).all()
    return sorted((row for row in rows if row.type.startswith(prefix)), key=lambda row: row.seq)


def _error(response: httpx.Response) -> str:
    body = response.json()
    assert isinstance(body, dict)
    return str(body["error"])


def _org_rule(db: Database, org_id: str, clock: FrozenClock, kind: RuleKind, limit: str | None = None) -> str:
    with db.write() as session:
        return add_rule(
            session,
            target=RuleTarget(RuleScope.ORG, org_id, org_id),
            kind=kind,
            host="reports.example.com" if kind == RuleKind.HOLD else None,
            path_prefix=None,
            limit_usd=Decimal(limit) if limit else None,
            window="day" if limit else None,
            actor="test:admin",
            now=clock.now(),
        ).id


def test_an_owner_approves_with_a_passkey_and_the_change_is_made_as_them(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    agent = owner.agent
    limit_rule = _org_rule(db, agent.org_id, clock, RuleKind.LIMIT, "30")
    hold_rule = _org_rule(db, agent.org_id, clock, RuleKind.HOLD)
    request_id = _ask(
        db,
        server,
        agent,
        {
            "addAllowHosts": ["reports.example.com"],
            "dailyCapUsd": "25",
            "raiseRuleLimits": [{"ruleId": limit_rule, "limitUsd": "60"}],
            "removeRules": [hold_rule],
        },
    )
    text, _, basis = _page(owner.browser, request_id)
    shown = html.unescape(text)
    for line in (
        "<h1>Change what agent agent-",
        "Allowed hosts</dt>",
        "Now:</span> api.example.com<br>",
        "After approval:</span> <strong>api.example.com, reports.example.com</strong>",
        "Most per day (UTC)</dt>",
        "After approval:</span> <strong>25.00 USD</strong>",
        f"Rule {limit_rule}: limit per day (a rule of the whole organisation: it bounds every agent)",
        "After approval:</span> <strong>60.00 USD</strong>",
        f"Rule {hold_rule}: hold, for host reports.example.com (a rule of the whole organisation",
        "After approval:</span> <strong>removed</strong>",
        "24 h 0 min left",
        "at policy version 2",
    ):
        assert line in shown, line
    assert basis == f"policy:2;{min(limit_rule, hold_rule)}:1;{max(limit_rule, hold_rule)}:1"
    done = _decide(owner.browser, request_id, "approve")
    assert done.status_code == 200, done.text
    assert done.json() == {"redirect": f"/policy-changes/{request_id}?done=approved"}

    row = _row(db, request_id)
    assert (row.status, row.decided_by, row.applied_version) == ("approved", owner.member_id, 3)
    actor = f"member:{owner.member_id}"
    assert _policy_versions(db, agent.agent_id)[-1] == (3, actor)
    with db.read() as session:
        rules = {
            (rule.rule_id, rule.version): rule
            for rule in session.exec(select(RuleVersion).where(RuleVersion.org_id == agent.org_id))
        }
    assert (rules[(limit_rule, 2)].limit_atomic, rules[(limit_rule, 2)].created_by) == (60_000_000, actor)
    assert (rules[(hold_rule, 2)].active, rules[(hold_rule, 2)].created_by) == (False, actor)
    events = _events(db, agent.org_id, "policy")
    assert [event.type for event in events][-5:] == [
        "policy_change.requested",
        "policy.changed",
        "policy.rule_changed",
        "policy.rule_removed",
        "policy_change.approved",
    ]
    assert all(event.actor == actor for event in events[-4:])
    approved = events[-1]
    assert approved.data["via"] == "policy_change_page"
    assert approved.data["passkeyId"].startswith("pkey_")
    assert approved.data["credentialId"] == owner.browser.authenticator.credentials[0].id
    assert (approved.data["policyVersion"], approved.data["askedBy"]) == (3, f"agent:{agent.agent_id}")

    after = html.unescape(owner.browser.get(f"/policy-changes/{request_id}?done=approved").text)
    assert "You approved this change. It is in force now" in after
    assert re.search(
        r"<h1>Approved by person-[0-9a-f]{6}@example\.com at [0-9: -]+ UTC: "
        r"the agent's policy is now version 3</h1>",
        after,
    )
    assert 'data-decision="approve"' not in after


def test_a_rejection_changes_nothing(server: RunningServer, db: Database, owner: Person) -> None:
    request_id = _ask(db, server, owner.agent, {"maxUsdPerTx": "5"})
    before = _policy_versions(db, owner.agent.agent_id)
    done = _decide(owner.browser, request_id, "reject")
    assert done.json() == {"redirect": f"/policy-changes/{request_id}?done=rejected"}
    row = _row(db, request_id)
    assert (row.status, row.decided_by, row.applied_version) == ("rejected", owner.member_id, None)
    assert _policy_versions(db, owner.agent.agent_id) == before
    (event,) = _events(db, owner.agent.org_id, "policy_change.rejected")
    assert event.data["passkeyId"].startswith("pkey_")
    page = html.unescape(owner.browser.get(f"/policy-changes/{request_id}").text)
    assert re.search(
        r"<h1>Rejected by person-[0-9a-f]{6}@example\.com at [0-9: -]+ UTC: nothing changed</h1>", page
    )
    # Decided once: nothing more can be decided.
    _, again = _options(owner.browser, request_id, "approve", basis="")
    assert (again.status_code, _error(again)) == (409, "policy_change_not_pending")


@pytest.mark.parametrize("role", [Role.APPROVER, Role.VIEWER])
def test_approvers_and_viewers_see_the_request_but_cannot_decide_it(
    server: RunningServer, db: Database, owner: Person, role: Role
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    member = enrolled_person(server, db, role=role, org_id=owner.agent.org_id)
    try:
        text, csrf, basis = _page(member.browser, request_id)
        assert "Most per day (UTC)" in text
        assert 'id="agent-note"' in text
        assert 'data-decision="approve"' not in text
        assert "Only an owner or admin of your organisation may approve or reject" in text
        assert (
            f'href="/policy-changes/{request_id}"' in member.browser.get("/approvals?tab=policy-changes").text
        )
        for decision in ("approve", "reject"):
            refused = member.browser.http.post(
                f"/policy-changes/{request_id}/options",
                json={"csrf": csrf, "decision": decision, "basis": basis},
            )
            assert (refused.status_code, _error(refused)) == (403, "policy_change_forbidden")
    finally:
        member.browser.close()
    assert _row(db, request_id).status == "pending"


def test_nobody_outside_the_organisation_and_no_agent_token_can_decide(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    agent = make_agent(
        db,
        server.settings,
        allow_hosts=["api.example.com"],
        org_id=owner.agent.org_id,
        name="asker",
        clock=clock,
    )
    request_id = _ask(db, server, agent, {"dailyCapUsd": "20"})
    stranger = enrolled_person(server, db)
    try:
        missing = stranger.browser.get(f"/policy-changes/{request_id}")
        assert missing.status_code == 404
        assert "No policy change here" in missing.text
        csrf = csrf_of(stranger.browser.get("/admin").text)
        refused = stranger.browser.http.post(
            f"/policy-changes/{request_id}/options",
            json={"csrf": csrf, "decision": "approve", "basis": "policy:2"},
        )
        assert (refused.status_code, _error(refused)) == (404, "policy_change_not_found")
    finally:
        stranger.browser.close()
    bearer = {"Authorization": f"Bearer {agent.token}"}
    with httpx.Client(base_url=server.settings.pages_origin, follow_redirects=False, timeout=15) as anonymous:
        page = anonymous.get(f"/policy-changes/{request_id}", headers=bearer)
        assert (page.status_code, page.headers["location"]) == (
            302,
            f"/login?next=%2Fpolicy-changes%2F{request_id}",
        )
        for step in ("options", "verify"):
            posted = anonymous.post(
                f"/policy-changes/{request_id}/{step}",
                headers=bearer,
                json={"decision": "approve", "basis": "policy:2", "challengeId": "wch_x", "credential": {}},
            )
            assert (posted.status_code, _error(posted)) == (401, "sign_in_required")
        for method, path in (
            ("PATCH", f"/api/v1/agents/{agent.agent_id}/policy"),
            ("GET", f"/api/v1/agents/{agent.agent_id}/policy"),
            ("POST", f"/api/v1/agents/{agent.agent_id}/tokens"),
        ):
            answer = anonymous.request(method, path, headers=bearer, json={"dailyCapUsd": "20"})
            assert (answer.status_code, answer.json()["code"]) == (401, "invalid_token")
    assert _row(db, request_id).status == "pending"
    assert _policy_versions(db, agent.agent_id)[-1][0] == 2


def test_a_replayed_assertion_or_one_for_another_request_decides_nothing(
    server: RunningServer, db: Database, owner: Person
) -> None:
    first = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    second = _ask(db, server, owner.agent, {"dailyCapUsd": "30"})
    csrf, challenge_id, answer = _answered(owner.browser, first, "approve")
    # Posted to another request's page, the challenge is used up and decides nothing.
    moved = _verify(owner.browser, second, csrf, "approve", challenge_id, answer)
    assert (moved.status_code, _error(moved)) == (400, "challenge_expired")
    replay = _verify(owner.browser, first, csrf, "approve", challenge_id, answer)
    assert (replay.status_code, _error(replay)) == (400, "challenge_expired")
    # A challenge for approving cannot be spent on a rejection, nor the other way round.
    csrf, challenge_id, answer = _answered(owner.browser, first, "approve")
    flipped = _verify(owner.browser, first, csrf, "reject", challenge_id, answer)
    assert (flipped.status_code, _error(flipped)) == (400, "challenge_expired")
    assert (_row(db, first).status, _row(db, second).status) == ("pending", "pending")
    done = _decide(owner.browser, first, "approve")
    assert done.status_code == 200, done.text
    # The approving challenge refused as a rejection is still unspent, and a request decided
    # since takes no second decision with it.
    _, csrf, _ = _page(owner.browser, first)
    again = _verify(owner.browser, first, csrf, "approve", challenge_id, answer)
    assert (again.status_code, _error(again)) == (409, "policy_change_not_pending")
    assert _row(db, first).applied_version == 3


def _store_change(db: Database, request_id: str, *, daily_cap: str, rehash: bool) -> None:
    """Someone with the database's credentials edits a request's stored change."""
    with db.write() as session:
        row = session.get(PolicyChangeRequest, request_id)
        assert row is not None
        row.change_json = row.change_json.replace('"dailyCapUsd":"20.00"', f'"dailyCapUsd":"{daily_cap}"')
        if rehash:
            row.change_hash = change_hash(row.change_json)
        session.add(row)


@pytest.mark.parametrize(
    ("rehash", "refusal"), [(False, "policy_change_altered"), (True, "passkey_check_failed")]
)
def test_a_change_edited_after_the_challenge_is_refused(
    server: RunningServer, db: Database, owner: Person, rehash: bool, refusal: str
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    csrf, challenge_id, answer = _answered(owner.browser, request_id, "approve")
    _store_change(db, request_id, daily_cap="2000.00", rehash=rehash)
    refused = _verify(owner.browser, request_id, csrf, "approve", challenge_id, answer)
    assert _error(refused) == refusal
    assert _row(db, request_id).status == "pending"
    assert _policy_versions(db, owner.agent.agent_id)[-1][0] == 2
    if not rehash:
        text, _, _ = _page(owner.browser, request_id)
        assert "The stored change no longer matches the one the agent asked for" in text
        assert 'data-decision="approve"' not in text
        _, again = _options(owner.browser, request_id, "approve")
        assert (again.status_code, _error(again)) == (409, "policy_change_altered")


def test_a_policy_changed_after_the_challenge_is_refused(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    csrf, challenge_id, answer = _answered(owner.browser, request_id, "approve")
    change_policy(db, owner.agent.agent_id, PolicyChanges(deny_hosts=("bad.example",)), clock=clock)
    refused = _verify(owner.browser, request_id, csrf, "approve", challenge_id, answer)
    assert (refused.status_code, _error(refused)) == (400, "passkey_check_failed")
    assert _row(db, request_id).status == "pending"
    assert [version for version, _ in _policy_versions(db, owner.agent.agent_id)] == [1, 2, 3]


def test_a_decision_needs_the_page_that_shows_the_policy_in_force(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    _, _, shown = _page(owner.browser, request_id)
    assert shown == "policy:2"
    change_policy(db, owner.agent.agent_id, PolicyChanges(deny_hosts=("bad.example",)), clock=clock)
    for basis in (shown, "", "policy:3;rule_x:1"):
        _, stale = _options(owner.browser, request_id, "approve", basis=basis)
        assert (stale.status_code, _error(stale)) == (409, "policy_changed_meanwhile")
        assert "Load the page again" in stale.json()["message"]
    done = _decide(owner.browser, request_id, "approve")  # as the page shows it now
    assert done.status_code == 200, done.text
    assert _row(db, request_id).applied_version == 4


def test_a_change_that_no_longer_widens_can_only_be_rejected(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    change_policy(db, owner.agent.agent_id, PolicyChanges(daily_cap_usd=Decimal("50")), clock=clock)
    text, _, _ = _page(owner.browser, request_id)
    assert "no longer gives the agent more room than it has now" in text
    assert 'data-decision="approve"' not in text
    assert 'data-decision="reject"' in text
    _, refused = _options(owner.browser, request_id, "approve")
    assert (refused.status_code, _error(refused)) == (409, "policy_change_outdated")
    assert _decide(owner.browser, request_id, "reject").status_code == 200
    assert _policy_versions(db, owner.agent.agent_id)[-1][0] == 3


def test_a_lapsed_request_cannot_be_decided(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    csrf, challenge_id, answer = _answered(owner.browser, request_id, "approve")
    clock.advance(timedelta(hours=24).total_seconds())
    owner.browser.sign_in()  # the session lapsed with the day
    csrf = csrf_of(owner.browser.get("/admin").text)
    late = _verify(owner.browser, request_id, csrf, "approve", challenge_id, answer)
    assert (late.status_code, _error(late)) == (400, "challenge_expired")
    text, _, _ = _page(owner.browser, request_id)
    assert re.search(r"<h1>Nobody decided by [0-9: -]+ UTC: nothing changed</h1>", text)
    _, refused = _options(owner.browser, request_id, "approve")
    assert (refused.status_code, _error(refused)) == (409, "policy_change_not_pending")
    assert _policy_versions(db, owner.agent.agent_id)[-1][0] == 2


def test_the_agents_note_is_shown_as_fenced_plain_text_everywhere(
    server: RunningServer, db: Database, owner: Person
) -> None:
    request_id = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    page = owner.browser.get(f"/policy-changes/{request_id}").text
    escaped = html.escape(NOTE, quote=True).replace("&#x27;", "&#39;")
    assert f'<blockquote class="untrusted-text" id="agent-note">{escaped}</blockquote>' in page
    assert "<script>alert" not in page
    assert "Written by the agent, not by Paywarden or by a person" in page
    audit = owner.browser.get("/admin/audit?kind=policy_change.").text
    assert f'<blockquote class="untrusted-text">{escaped}</blockquote>' in audit
    assert "The agent's note: its own words, untrusted" in audit
    assert "<script>alert" not in audit


def test_the_inbox_the_overview_and_the_agent_page_count_what_waits(
    server: RunningServer, db: Database, owner: Person
) -> None:
    first = _ask(db, server, owner.agent, {"dailyCapUsd": "20"})
    second = _ask(db, server, owner.agent, {"addAllowHosts": ["new.example"]})
    inbox = owner.browser.get("/approvals?tab=policy-changes").text
    assert "Policy changes (2)</a>" in inbox
    for request_id in (first, second):
        assert f'href="/policy-changes/{request_id}"' in inbox
    assert "Allowed hosts: add new.example" in inbox
    assert "2 policy changes wait" in owner.browser.get("/approvals").text
    assert "2 policy changes asked for by agents wait" in owner.browser.get("/admin").text
    agent_page = owner.browser.get(f"/admin/agents/{owner.agent.agent_id}").text
    assert f'href="/policy-changes/{second}"' in agent_page
    assert _decide(owner.browser, first, "reject").status_code == 200
    inbox = owner.browser.get("/approvals?tab=policy-changes").text
    assert "Policy changes (1)</a>" in inbox
    assert "nothing changed." in inbox


GOLDEN_NONCE = bytes(range(32))
GOLDEN_HASH = "ab" * 32
GOLDEN_ENCODING = (
    b"paywarden/policy-change-decision/v1"
    + b"\x00\x00\x00\x07" + b"approve"
    + b"\x00\x00\x00\x0a" + b"pcr_golden"
    + b"\x00\x00\x00\x0a" + b"org_golden"
    + b"\x00\x00\x00\x0a" + b"agt_golden"
    + b"\x00\x00\x00\x40" + GOLDEN_HASH.encode()
    + b"\x00\x00\x00\x16" + b"policy:7;rule_golden:2"
    + b"\x00\x00\x00\x20" + GOLDEN_NONCE
)  # fmt: skip


def test_a_decisions_challenge_encodes_every_field_apart() -> None:
    encoded = policy_change_canonical(
        request_id="pcr_golden",
        approve=True,
        org_id="org_golden",
        agent_id="agt_golden",
        change_sha256=GOLDEN_HASH,
        basis="policy:7;rule_golden:2",
        nonce=GOLDEN_NONCE,
    )
    assert encoded == GOLDEN_ENCODING
    row = PolicyChangeRequest(
        id="pcr_golden",
        org_id="org_golden",
        agent_id="agt_golden",
        asked_by="agent:agt_golden",
        note="n",
        change_json="{}",
        change_hash="x",
        policy_version=7,
    )
    challenge = policy_change_challenge_for(row, approve=False, basis="policy:7", nonce=GOLDEN_NONCE)
    expected = policy_change_canonical(
        request_id="pcr_golden",
        approve=False,
        org_id="org_golden",
        agent_id="agt_golden",
        change_sha256=hashlib.sha256(b"{}").hexdigest(),  # of the change as stored, not the column
        basis="policy:7",
        nonce=GOLDEN_NONCE,
    )
    assert challenge == hashlib.sha256(expected).digest()
    assert b"reject" in expected
