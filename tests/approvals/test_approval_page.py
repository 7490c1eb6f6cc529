"""The approval page without a browser: what a member who may decide sees, a decision confirmed
with a passkey whose challenge commits to the payment, and every refusal: a tampered amount or
payee, a replayed assertion, an assertion without user verification, members who may not decide,
a visitor who is not signed in, and an agent's token."""

from __future__ import annotations

import base64
import hashlib
import html
import struct
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from sqlmodel import select

from server.approvals.confirmation import challenge_for
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import Approval, AuditEvent, Member, Organization, PaymentIntent, WebAuthnChallenge
from server.vocabulary import Role
from tests.mcp.test_no_policy_writes import _call_graph, _reachable
from tests.support.chain import free_port
from tests.support.clocks import frozen_clock
from tests.support.ledger import CENT, PAYEE, facts, reserve_now
from tests.support.oauth import Person, SoftBrowser, csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve

OTHER_PAYEE = "0x2222222222222222222222222222222222222222"

# One decision's challenge encoding, written out byte by byte: the domain label, then each field as
# a 4-byte big-endian length and its bytes (addresses in lower case), the nonce last.
GOLDEN_NONCE = bytes(range(32))
GOLDEN_ENCODING = (
    b"paywarden/approval-decision/v1"
    + b"\x00\x00\x00\x07" + b"approve"
    + b"\x00\x00\x00\x0a" + b"apr_golden"
    + b"\x00\x00\x00\x06" + b"500000"
    + b"\x00\x00\x00\x2a" + b"0x036cbd53842c5426634e7929541ec2318f3dcf7e"
    + b"\x00\x00\x00\x2a" + b"0x1111111111111111111111111111111111111111"
    + b"\x00\x00\x00\x0c" + b"eip155:84532"
    + b"\x00\x00\x00\x0f" + b"api.example.com"
    + b"\x00\x00\x00\x21" + b"https://api.example.com/v1/search"
    + b"\x00\x00\x00\x20" + GOLDEN_NONCE
)  # fmt: skip
GOLDEN_CHALLENGE = "d4b91d1de7c63b29f5a839965fd50a2b60b26df30acf0e817aabf5dbff319abe"

# Every test enrols its own owner in a new organisation: they share one server and its clock per
# module and database kind (docs/development.md, "Sharing a server"). The clock only moves
# forward, and each test reads it as it finds it. Rate limits count per address and minute, which
# the shared frozen clock never ends; they are not what this module tests.
UNLIMITED = {
    "PAYWARDEN_RATE_LIMIT_SIGN_IN": "10000",
    "PAYWARDEN_RATE_LIMIT_REGISTER": "10000",
    "PAYWARDEN_RATE_LIMIT_AUTHORIZE": "10000",
    "PAYWARDEN_RATE_LIMIT_TOKEN": "100000",
}


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


def _held(db: Database, person: Person, clock: FrozenClock, key: str, **kw: Any) -> Approval:
    held = reserve_now(db, person.agent.agent_id, facts(key, **kw), clock.now())
    assert held.kind == "held", held
    assert held.approval is not None
    return held.approval


def _email(db: Database, member_id: str) -> str:
    with db.read() as session:
        member = session.get(Member, member_id)
        assert member is not None
        return member.email


def _row(db: Database, approval_id: str) -> Approval:
    with db.read() as session:
        row = session.get(Approval, approval_id)
        assert row is not None
        return row


def _options(browser: SoftBrowser, approval_id: str, decision: str) -> tuple[str, dict[str, Any]]:
    csrf = csrf_of(browser.get(f"/approvals/{approval_id}").text)
    started = browser.http.post(
        f"/approvals/{approval_id}/options", json={"csrf": csrf, "decision": decision}
    )
    assert started.status_code == 200, started.text
    return csrf, started.json()


def _verify(
    browser: SoftBrowser,
    approval_id: str,
    csrf: str,
    decision: str,
    challenge_id: str,
    answer: dict[str, Any],
) -> httpx.Response:
    return browser.http.post(
        f"/approvals/{approval_id}/verify",
        json={"csrf": csrf, "decision": decision, "challengeId": challenge_id, "credential": answer},
    )


def _decide(browser: SoftBrowser, approval_id: str, decision: str) -> httpx.Response:
    csrf, body = _options(browser, approval_id, decision)
    answer = browser.authenticator.authenticate(body["publicKey"])
    return _verify(browser, approval_id, csrf, decision, body["challengeId"], answer)


def _encoded(fields: dict[str, Any]) -> bytes:
    """The test's own encoder of a decision, kept honest by the golden vector below."""
    items: list[bytes] = [
        b"approve" if fields["approve"] else b"deny",
        fields["approval_id"].encode(),
        str(fields["amount_atomic"]).encode(),
        fields["asset"].lower().encode(),
        fields["pay_to"].lower().encode(),
        fields["network"].encode(),
        fields["host"].encode(),
        fields["resource"].encode(),
        fields["nonce"],
    ]
    return b"paywarden/approval-decision/v1" + b"".join(struct.pack(">I", len(item)) + item for item in items)


GOLDEN_FIELDS: dict[str, Any] = {
    "approval_id": "apr_golden",
    "approve": True,
    "amount_atomic": 500_000,
    "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
    "pay_to": "0x1111111111111111111111111111111111111111",
    "network": "eip155:84532",
    "host": "api.example.com",
    "resource": "https://api.example.com/v1/search",
    "nonce": GOLDEN_NONCE,
}


def test_the_challenge_of_a_known_decision_is_the_golden_vector() -> None:
    assert hashlib.sha256(GOLDEN_ENCODING).hexdigest() == GOLDEN_CHALLENGE
    assert _encoded(GOLDEN_FIELDS) == GOLDEN_ENCODING
    approval = Approval(
        id="apr_golden",
        org_id="org_golden",
        agent_id="agent_golden",
        intent_id="pi_golden",
        idempotency_key="golden",
        decision={},
        amount_atomic=500_000,
        asset=GOLDEN_FIELDS["asset"],
        pay_to=GOLDEN_FIELDS["pay_to"],
        network="eip155:84532",
        host="api.example.com",
        resource="https://api.example.com/v1/search",
    )
    assert challenge_for(approval, approve=True, nonce=GOLDEN_NONCE).hex() == GOLDEN_CHALLENGE
    # Deny is another word, so another challenge.
    denied = _encoded({**GOLDEN_FIELDS, "approve": False})
    assert challenge_for(approval, approve=False, nonce=GOLDEN_NONCE) == hashlib.sha256(denied).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _events(db: Database, org_id: str, type_: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(
            session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id, AuditEvent.type == type_))
        )


def test_a_decider_sees_the_payment_and_approves_it_with_a_passkey(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "page-0001", amount=50 * CENT)
    inbox = owner.browser.get("/approvals")
    assert inbox.status_code == 200
    assert f'href="/approvals/{approval.id}"' in inbox.text
    assert "0.50 USD to api.example.com" in inbox.text
    home = owner.browser.get("/admin").text
    assert 'href="/approvals"' in home  # the inbox is in the navigation
    assert "1 payment waits for a decision" in home

    page = owner.browser.get(f"/approvals/{approval.id}")
    assert page.status_code == 200
    text = html.unescape(page.text)
    for shown in (
        "Approve 0.50 USD to api.example.com?",
        "Agent</dt><dd>agent-",
        "/v1/search",
        PAYEE,
        f"{PAYEE[:6]}…{PAYEE[-4:]}",
        "Base Sepolia",
        "Test network: no real money",
        "Your organisation has never paid this payee.",
        "15 min left",
    ):
        assert shown in text, shown
    assert f"Policy version</dt><dd>{approval.decision['policyVersion']}</dd>" in page.text

    done = _decide(owner.browser, approval.id, "approve")
    assert done.status_code == 200, done.text
    assert done.json() == {"redirect": f"/approvals/{approval.id}?done=approved"}
    row = _row(db, approval.id)
    assert (row.status, row.decided_by) == ("approved", owner.member_id)
    (event,) = _events(db, row.org_id, "approval.approved")
    assert event.actor == f"member:{owner.member_id}"
    assert event.data["via"] == "approval_page"
    assert event.data["credentialId"] == owner.browser.authenticator.credentials[0].id
    assert event.data["passkeyId"].startswith("pkey_")
    after = owner.browser.get(f"/approvals/{approval.id}?done=approved")
    assert "You approved this payment." in after.text
    # A call of the agent's may be waiting for this decision: the page never says it must retry.
    assert "a call of the agent&#39;s that waits for your decision pays within seconds" in after.text
    assert 'data-decision="approve"' not in after.text  # nothing left to decide
    assert f'href="/approvals/{approval.id}"' not in owner.browser.get("/approvals").text


def test_a_denial_closes_the_held_payment(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "page-deny-1")
    done = _decide(owner.browser, approval.id, "deny")
    assert done.json() == {"redirect": f"/approvals/{approval.id}?done=denied"}
    assert _row(db, approval.id).status == "denied"
    with db.read() as session:
        intent = session.get(PaymentIntent, approval.intent_id)
        assert intent is not None
        assert (intent.status, intent.failure_code) == ("failed", "approval_denied")
    (event,) = _events(db, approval.org_id, "approval.denied")
    assert event.data["passkeyId"].startswith("pkey_")
    # Decided once: a second decision is refused.
    csrf = csrf_of(owner.browser.get("/approvals").text)
    again = owner.browser.http.post(
        f"/approvals/{approval.id}/options", json={"csrf": csrf, "decision": "approve"}
    )
    assert again.status_code == 409


def test_the_pages_say_when_disabling_the_agent_ended_a_payment(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    """Disabling denies the pending approval and closes the approved one not yet used: neither
    page says a member denied it, nor that the payment will be made."""
    pending = _held(db, owner, clock, "page-off-1")
    approved = _held(db, owner, clock, "page-off-2")
    assert _decide(owner.browser, approved.id, "approve").status_code == 200
    agent_page = f"/admin/agents/{owner.agent.agent_id}"
    csrf = csrf_of(owner.browser.get(agent_page).text)
    disabled = owner.browser.http.post(f"{agent_page}/disable", data={"csrf": csrf})
    assert disabled.status_code == 303
    when = clock.now().strftime("%Y-%m-%d %H:%M")
    said = {
        pending.id: f"Denied when the agent was disabled at {when} UTC: nothing was paid",
        approved.id: f"Approved by {_email(db, owner.member_id)} at {when} UTC, but the agent was disabled "
        "before it paid: nothing was paid",
    }
    for approval_id, sentence in said.items():
        page = html.unescape(owner.browser.get(f"/approvals/{approval_id}").text)
        assert f"<h1>{sentence}</h1>" in page
        assert "will be made" not in page
        assert "Denied by" not in page
    decided = html.unescape(owner.browser.get("/approvals?tab=decided").text)
    for sentence in said.values():
        assert f"<p>{sentence}.</p>" in decided


@pytest.mark.parametrize("change", ["amount", "asset", "pay_to", "network", "host", "resource", "decision"])
def test_an_assertion_over_another_payment_is_refused(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock, change: str
) -> None:
    approval = _held(db, owner, clock, f"tamper-{change}")
    csrf, body = _options(owner.browser, approval.id, "approve")
    with db.read() as session:
        stored = session.get(WebAuthnChallenge, body["challengeId"])
        assert stored is not None
        assert stored.nonce is not None
        nonce = stored.nonce
    fields: dict[str, Any] = {
        "approval_id": approval.id,
        "approve": True,
        "amount_atomic": approval.amount_atomic,
        "asset": approval.asset,
        "pay_to": approval.pay_to,
        "network": approval.network,
        "host": approval.host,
        "resource": approval.resource,
        "nonce": nonce,
    }
    # The challenge the server handed out is exactly the hash of this payment's encoding...
    assert body["publicKey"]["challenge"] == _b64(hashlib.sha256(_encoded(fields)).digest())
    # ...and a passkey that signed any other payment (or the other decision) is refused.
    changes: dict[str, dict[str, Any]] = {
        "amount": {"amount_atomic": approval.amount_atomic * 100},
        "asset": {"asset": "0x" + "3" * 40},
        "pay_to": {"pay_to": OTHER_PAYEE},
        "network": {"network": "eip155:8453"},
        "host": {"host": "api.evil.example"},
        "resource": {"resource": approval.resource + "?account=other"},
        "decision": {"approve": False},
    }
    tampered = changes[change]
    forged = {
        **body["publicKey"],
        "challenge": _b64(hashlib.sha256(_encoded({**fields, **tampered})).digest()),
    }
    answer = owner.browser.authenticator.authenticate(forged)
    refused = _verify(owner.browser, approval.id, csrf, "approve", body["challengeId"], answer)
    assert refused.status_code == 400
    assert refused.json()["error"] == "passkey_check_failed"
    assert _row(db, approval.id).status == "pending"


def test_the_server_recomputes_the_challenge_from_the_approval_as_it_is(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    """Should the payment a challenge was made for change in the database, the passkey signed
    something else: refused."""
    approval = _held(db, owner, clock, "changed-001")
    csrf, body = _options(owner.browser, approval.id, "approve")
    answer = owner.browser.authenticator.authenticate(body["publicKey"])
    with db.write() as session:
        row = session.get(Approval, approval.id)
        assert row is not None
        row.pay_to = OTHER_PAYEE
        session.add(row)
    refused = _verify(owner.browser, approval.id, csrf, "approve", body["challengeId"], answer)
    assert refused.status_code == 400
    assert _row(db, approval.id).status == "pending"


def test_one_assertion_decides_once(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    first = _held(db, owner, clock, "replay-0001")
    second = _held(db, owner, clock, "replay-0002")
    csrf, body = _options(owner.browser, first.id, "deny")
    answer = owner.browser.authenticator.authenticate(body["publicKey"])
    assert _verify(owner.browser, first.id, csrf, "deny", body["challengeId"], answer).status_code == 200
    # The same assertion again: its nonce is used up.
    replayed = _verify(owner.browser, first.id, csrf, "deny", body["challengeId"], answer)
    assert (replayed.status_code, replayed.json()["error"]) == (400, "challenge_expired")
    # The same assertion for another approval, under that approval's own fresh challenge.
    _, other = _options(owner.browser, second.id, "deny")
    moved = _verify(owner.browser, second.id, csrf, "deny", other["challengeId"], answer)
    assert moved.status_code == 400
    # A challenge of one approval cannot decide another.
    crossed = _verify(owner.browser, first.id, csrf, "deny", other["challengeId"], answer)
    assert crossed.status_code == 400
    assert _row(db, second.id).status == "pending"


def test_a_passkey_without_user_verification_cannot_decide(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "presence-01")
    owner.browser.authenticator.user_verified = False
    refused = _decide(owner.browser, approval.id, "approve")
    assert (refused.status_code, refused.json()["error"]) == (400, "passkey_check_failed")
    assert _row(db, approval.id).status == "pending"


def test_another_members_passkey_cannot_decide(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "borrowed-01")
    colleague = enrolled_person(server, db, role=Role.ADMIN, org_id=owner.agent.org_id)
    try:
        csrf, body = _options(owner.browser, approval.id, "approve")
        public_key = {**body["publicKey"], "allowCredentials": []}
        answer = colleague.browser.authenticator.authenticate(public_key)
        refused = _verify(owner.browser, approval.id, csrf, "approve", body["challengeId"], answer)
        assert refused.status_code == 400
        assert _row(db, approval.id).status == "pending"
    finally:
        colleague.browser.close()


def test_viewers_other_organisations_and_visitors_see_nothing(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "secret-0001", amount=37 * CENT)
    viewer = enrolled_person(server, db, role=Role.VIEWER, org_id=owner.agent.org_id)
    stranger = enrolled_person(server, db, role=Role.OWNER)
    try:
        for browser in (viewer.browser, stranger.browser):
            page = browser.get(f"/approvals/{approval.id}")
            assert page.status_code == 404
            assert "0.37" not in page.text
            assert "api.example.com" not in page.text
            assert PAYEE not in page.text
            assert approval.id not in browser.get("/approvals").text
            csrf = csrf_of(browser.get("/approvals").text)
            for step in ("options", "verify"):
                refused = browser.http.post(
                    f"/approvals/{approval.id}/{step}",
                    json={"csrf": csrf, "decision": "approve", "challengeId": "wch_x", "credential": {}},
                )
                assert refused.status_code in (400, 404), (step, refused.text)
                assert "0.37" not in refused.text
        assert 'href="/approvals"' not in viewer.browser.get("/admin").text
        with SoftBrowser(server) as visitor:
            away = visitor.get(f"/approvals/{approval.id}")
            assert away.status_code == 302
            assert away.headers["location"] == f"/login?next=%2Fapprovals%2F{approval.id}"
            assert visitor.get("/approvals").status_code == 302
            posted = visitor.http.post(f"/approvals/{approval.id}/options", json={"decision": "approve"})
            assert posted.status_code == 401
        assert _row(db, approval.id).status == "pending"
    finally:
        viewer.browser.close()
        stranger.browser.close()


def test_an_agents_token_cannot_approve_through_any_endpoint(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "by-token-01")
    bearer = {"Authorization": f"Bearer {owner.agent.token}"}
    with httpx.Client(base_url=server.settings.pages_origin, headers=bearer, timeout=15) as agent:
        assert agent.get(f"/approvals/{approval.id}").status_code == 302
        for step in ("options", "verify"):
            answer = agent.post(
                f"/approvals/{approval.id}/{step}",
                json={"decision": "approve", "challengeId": "wch_x", "credential": {}},
            )
            assert answer.status_code == 401
        assert agent.post("/admin/settings/ttl", data={"minutes": "1440"}).status_code == 302
    assert _row(db, approval.id).status == "pending"
    # No MCP tool can reach the only function that writes a decision.
    graph, tools = _call_graph()
    for tool, references in tools.items():
        reached = _reachable(references, graph) | (references & set(graph))
        assert "_record_decision" not in reached, tool


def test_an_owner_sets_how_long_approvals_wait(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    assert "A pending approval lapses after 15 minutes." in owner.browser.get("/approvals").text
    csrf = csrf_of(owner.browser.get("/admin/settings").text)
    changed = owner.browser.http.post("/admin/settings/ttl", data={"csrf": csrf, "minutes": "5"})
    assert (changed.status_code, changed.headers["location"]) == (303, "/admin/settings?done=ttl")
    assert "A pending approval lapses after 5 minutes." in owner.browser.get("/approvals").text
    approval = _held(db, owner, clock, "short-ttl-1")
    assert approval.expires_at == clock.now() + (approval.expires_at - approval.created_at)
    assert (approval.expires_at - approval.created_at).total_seconds() == 300
    refused = owner.browser.http.post("/admin/settings/ttl", data={"csrf": csrf, "minutes": "4"})
    assert refused.status_code == 400
    admin = enrolled_person(server, db, role=Role.ADMIN, org_id=owner.agent.org_id)
    try:
        admin_csrf = csrf_of(admin.browser.get("/admin/settings").text)
        assert '<fieldset class="bare row" disabled>' in admin.browser.get("/admin/settings").text
        denied = admin.browser.http.post("/admin/settings/ttl", data={"csrf": admin_csrf, "minutes": "60"})
        assert denied.status_code == 403
        missing_csrf = admin.browser.http.post("/admin/settings/ttl", data={"minutes": "60"})
        assert missing_csrf.status_code == 403
    finally:
        admin.browser.close()
    with db.read() as session:
        org = session.get(Organization, owner.agent.org_id)
        assert org is not None
        assert org.approval_ttl_seconds == 300
    # The page counts down the organisation's TTL, and a lapsed approval cannot be decided.
    assert "5 min left" in owner.browser.get(f"/approvals/{approval.id}").text
    clock.advance(301)
    csrf = csrf_of(owner.browser.get("/approvals").text)
    lapsed = owner.browser.http.post(
        f"/approvals/{approval.id}/options", json={"csrf": csrf, "decision": "approve"}
    )
    assert lapsed.status_code == 409


def test_a_challenge_from_one_process_is_answered_and_used_up_on_another(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    """Behind a load balancer the answer may reach another server process: the nonce lives in
    the database, so process B checks what process A handed out, and A then refuses a replay."""
    approval = _held(db, owner, clock, "two-procs-1")
    csrf, body = _options(owner.browser, approval.id, "approve")
    answer = owner.browser.authenticator.authenticate(body["publicKey"])
    with RunningServer(server.settings, port=free_port(), clock=clock) as other:
        to_b = httpx.Client(
            base_url=f"http://127.0.0.1:{other.port}",
            headers={
                "Host": urlsplit(server.settings.pages_origin).netloc,
                "Cookie": "; ".join(f"{c.name}={c.value}" for c in owner.browser.http.cookies.jar),
            },
            timeout=15,
        )
        with to_b:
            done = to_b.post(
                f"/approvals/{approval.id}/verify",
                json={
                    "csrf": csrf,
                    "decision": "approve",
                    "challengeId": body["challengeId"],
                    "credential": answer,
                },
            )
        assert done.status_code == 200, done.text
    assert _row(db, approval.id).status == "approved"
    replayed = _verify(owner.browser, approval.id, csrf, "approve", body["challengeId"], answer)
    assert replayed.json()["error"] == "challenge_expired"


def test_two_members_deciding_at_once_make_one_decision(
    server: RunningServer, db: Database, owner: Person, clock: FrozenClock
) -> None:
    approval = _held(db, owner, clock, "race-00001")
    colleague = enrolled_person(server, db, role=Role.APPROVER, org_id=owner.agent.org_id)
    try:
        ready = []
        for person, decision in ((owner, "approve"), (colleague, "deny")):
            csrf, body = _options(person.browser, approval.id, decision)
            answer = person.browser.authenticator.authenticate(body["publicKey"])
            ready.append((person.browser, csrf, decision, body["challengeId"], answer))
        results: list[int] = []

        def post(item: tuple[SoftBrowser, str, str, str, dict[str, Any]]) -> None:
            browser, csrf, decision, challenge_id, answer = item
            results.append(_verify(browser, approval.id, csrf, decision, challenge_id, answer).status_code)

        threads = [threading.Thread(target=post, args=(item,)) for item in ready]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert sorted(results) == [200, 409]
        decided = _row(db, approval.id)
        events = _events(db, approval.org_id, f"approval.{decided.status}")
        assert [event.subject_id for event in events] == [approval.id]
        assert (
            len(
                _events(db, approval.org_id, "approval.approved")
                + _events(db, approval.org_id, "approval.denied")
            )
            == 1
        )
    finally:
        colleague.browser.close()
