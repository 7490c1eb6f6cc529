"""The admin API's organisation settings, agents made, rules, payments read one at a time and the
catalog, against a real server: an admin:write token changes what the settings page and the
command line change, with the same checks and the same error codes; what widens waits (202)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import jsonschema  # type: ignore[import-untyped]
import pytest
from sqlmodel import col, select

from auth.scopes import Scope
from server.catalog.service import add_entry
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, Organization
from tests.support.admin_api import admin_token, call, problem
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member, make_team

SLACK = "https://hooks.slack.com/services/T000/B000/very-secret-part-7x9Q"
PAYEE = "0x" + "ab" * 20


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


@pytest.fixture
def sqlite_server(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


def _described(server: RunningServer) -> dict[str, Any]:
    return dict(httpx.get(f"{server.settings.admin_api_audience}/openapi.json", timeout=30).json())


def _matches(document: dict[str, Any], answer: httpx.Response, path: str, method: str) -> None:
    described = document["paths"][path][method]["responses"][str(answer.status_code)]["content"]
    media = described[answer.headers["content-type"].split(";")[0]]
    jsonschema.validate(answer.json(), {**media["schema"], "components": document["components"]})


def test_organisation_settings_change_as_the_settings_page_checks_them(
    server: RunningServer, db: Database
) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], org_name="acme-settings")
    make_agent(db, server.settings, allow_hosts=["api.example.com"], org_name="taken-name")
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    document = _described(server)

    shown = call(server, "get", "/organization", reader)
    _matches(document, shown, "/organization", "get")
    assert {k: shown.json()[k] for k in ("id", "name", "approvalTtlSeconds", "slackWebhook")} == {
        "id": agent.org_id,
        "name": "acme-settings",
        "approvalTtlSeconds": 900,
        "slackWebhook": None,
    }
    problem(
        call(server, "patch", "/organization", reader, body={"approvalTtlSeconds": 600}),
        403,
        "insufficient_scope",
    )

    changed = call(
        server, "patch", "/organization", writer, body={"approvalTtlSeconds": 600, "slackWebhookUrl": SLACK}
    )
    _matches(document, changed, "/organization", "patch")
    assert changed.json()["approvalTtlSeconds"] == 600
    masked = changed.json()["slackWebhook"]
    assert masked == "https://hooks.slack.com/…7x9Q"
    again = call(server, "get", "/organization", reader)
    assert again.json()["slackWebhook"] == masked
    for answer in (changed, again):
        assert "very-secret-part" not in answer.text
    with db.read() as session:
        org = session.get(Organization, agent.org_id)
        assert org is not None
        assert org.slack_webhook_sealed is not None
        assert b"very-secret-part" not in org.slack_webhook_sealed
        events = session.exec(select(AuditEvent).where(col(AuditEvent.type) == "org.changed")).all()
        assert all("very-secret-part" not in str(event.data) for event in events)

    # The settings page's checks, with its codes: nothing is kept of a change that fails anywhere.
    for body, reason in (
        ({"approvalTtlSeconds": 60}, "invalid_approval_ttl"),
        ({"approvalTtlSeconds": 86401}, "invalid_approval_ttl"),
        ({"name": "renamed", "approvalTtlSeconds": 5}, "invalid_approval_ttl"),
        ({"slackWebhookUrl": "https://evil.example.com/services/x"}, "invalid_webhook_url"),
        ({"slackWebhookUrl": SLACK + "?x=1"}, "invalid_webhook_url"),
        ({"name": "no/slashes"}, "invalid_name"),
    ):
        refused = problem(call(server, "patch", "/organization", writer, body=body), 400, "invalid_input")
        assert refused["detail"].endswith(f"Reason: {reason}."), refused
    problem(call(server, "patch", "/organization", writer, body={"name": "taken-name"}), 400, "name_taken")
    problem(call(server, "patch", "/organization", writer, body={"colour": "red"}), 400, "invalid_body")
    assert call(server, "get", "/organization", reader).json() == again.json()

    renamed = call(
        server, "patch", "/organization", writer, body={"name": "acme-renamed", "slackWebhookUrl": None}
    )
    assert renamed.status_code == 200, renamed.text
    assert (renamed.json()["name"], renamed.json()["slackWebhook"]) == ("acme-renamed", None)
    with db.read() as session:
        org = session.get(Organization, agent.org_id)
        assert org is not None
        assert (org.slack_webhook_sealed, org.name) == (None, "acme-renamed")


def test_an_agent_is_created_with_no_host_allowed_and_its_weekly_rule(
    sqlite_server: RunningServer, sqlite_db: Database
) -> None:
    server, db = sqlite_server, sqlite_db
    first = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="first")
    team = make_team(db, first.org_id, "research")
    other = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="elsewhere")
    other_team = make_team(db, other.org_id, "their-team")
    writer = admin_token(db, server, first.org_id, frozenset({Scope.ADMIN_WRITE}))
    document = _described(server)

    made = call(
        server, "post", "/agents", writer, body={"name": "buyer", "network": "eip155:84532", "teamId": team}
    )
    assert made.status_code == 201, made.text
    _matches(document, made, "/agents", "post")
    agent = made.json()
    assert (agent["name"], agent["network"], agent["teamId"], agent["disabled"]) == (
        "buyer",
        "eip155:84532",
        team,
        False,
    )
    assert [a["name"] for a in call(server, "get", "/agents", writer).json()["agents"]] == ["first", "buyer"]
    policy = call(server, "get", f"/agents/{agent['id']}/policy", writer).json()
    assert policy["policy"]["allowHosts"] == []
    own = [
        r
        for r in call(server, "get", "/rules", writer, agent=agent["id"]).json()["rules"]
        if r["scopeId"] == agent["id"]
    ]
    assert [(r["kind"], r["window"], r["source"]) for r in own] == [("limit", "week", "default")]

    problem(
        call(server, "post", "/agents", writer, body={"name": "buyer", "network": "eip155:84532"}),
        400,
        "name_taken",
    )
    problem(
        call(server, "post", "/agents", writer, body={"name": "x", "network": "eip155:1"}),
        400,
        "invalid_body",
    )
    problem(
        call(server, "post", "/agents", writer, body={"name": "x!/", "network": "eip155:8453"}),
        400,
        "invalid_input",
    )
    problem(
        call(
            server,
            "post",
            "/agents",
            writer,
            body={"name": "y", "network": "eip155:8453", "teamId": other_team},
        ),
        404,
        "team_not_found",
    )
    reader = admin_token(db, server, first.org_id, frozenset({Scope.ADMIN_READ}))
    problem(
        call(server, "post", "/agents", reader, body={"name": "z", "network": "eip155:8453"}),
        403,
        "insufficient_scope",
    )
    assert len(call(server, "get", "/agents", writer).json()["agents"]) == 2


def test_rules_are_added_and_lowered_at_once_and_widening_waits(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="ruled")
    member = make_member(db, agent.org_id, role="approver", email="rules@example.com")
    other = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="other-org")
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    document = _described(server)
    before = call(server, "get", "/rules", reader).json()["rules"]
    assert [r["source"] for r in before] == ["default"]  # the agent's weekly rule

    limit = call(
        server,
        "post",
        "/rules",
        writer,
        body={"scope": "org", "scopeId": agent.org_id, "kind": "limit", "limitUsd": "100", "window": "month"},
    )
    assert limit.status_code == 201, limit.text
    _matches(document, limit, "/rules", "post")
    rule = limit.json()
    assert (rule["scope"], rule["scopeId"], rule["limitUsd"], rule["window"], rule["version"]) == (
        "org",
        agent.org_id,
        "100.00",
        "month",
        1,
    )
    deny = call(
        server,
        "post",
        "/rules",
        writer,
        body={"scope": "member", "scopeId": member, "kind": "deny", "host": "*.Casino.example"},
    )
    assert deny.status_code == 201, deny.text
    assert deny.json()["host"] == "*.casino.example"
    listed = call(server, "get", "/rules", reader)
    _matches(document, listed, "/rules", "get")
    assert [r["id"] for r in listed.json()["rules"]] == [before[0]["id"], rule["id"], deny.json()["id"]]
    # For an agent: its own, and its organisation's (not the member's, whose agent it is not).
    applying = call(server, "get", "/rules", reader, agent=agent.agent_id).json()["rules"]
    assert [r["id"] for r in applying] == [before[0]["id"], rule["id"]]

    for body, status, code in (
        (
            {"scope": "agent", "scopeId": agent.agent_id, "kind": "deny", "host": "not a host"},
            400,
            "rule_rejected",
        ),
        ({"scope": "agent", "scopeId": agent.agent_id, "kind": "limit"}, 400, "rule_rejected"),
        (
            {"scope": "org", "scopeId": agent.org_id, "kind": "limit", "limitUsd": "lots"},
            400,
            "rule_rejected",
        ),
        (
            {"scope": "org", "scopeId": agent.org_id, "kind": "limit", "limitUsd": "0.0000001"},
            400,
            "rule_rejected",
        ),
        ({"scope": "org", "scopeId": agent.org_id, "kind": "hold", "limitUsd": "1"}, 400, "rule_rejected"),
        (
            {"scope": "agent", "scopeId": other.agent_id, "kind": "hold", "host": "a.example"},
            404,
            "scope_not_found",
        ),
        (
            {"scope": "org", "scopeId": other.org_id, "kind": "hold", "host": "a.example"},
            404,
            "scope_not_found",
        ),
        ({"scope": "planet", "scopeId": agent.org_id, "kind": "hold"}, 400, "invalid_body"),
    ):
        problem(call(server, "post", "/rules", writer, body=body), status, code)
    problem(
        call(
            server, "post", "/rules", reader, body={"scope": "org", "scopeId": agent.org_id, "kind": "hold"}
        ),
        403,
        "insufficient_scope",
    )

    path = f"/rules/{rule['id']}"
    lowered = call(server, "patch", path, writer, body={"limitUsd": "80"})
    assert lowered.status_code == 200, lowered.text
    _matches(document, lowered, "/rules/{rule_id}", "patch")
    assert (lowered.json()["limitUsd"], lowered.json()["version"]) == ("80.00", 2)
    raised = call(server, "patch", path, writer, body={"limitUsd": "80.01"})
    assert raised.status_code == 202, raised.text
    _matches(document, raised, "/rules/{rule_id}", "patch")
    change = call(server, "get", f"/changes/{raised.json()['changeId']}", reader).json()
    assert (change["kind"], change["subjectId"], change["status"]) == ("rule_change", rule["id"], "pending")
    removing = call(server, "delete", path, writer)
    assert removing.status_code == 202, removing.text
    _matches(document, removing, "/rules/{rule_id}", "delete")
    assert (
        call(server, "get", f"/changes/{removing.json()['changeId']}", reader).json()["kind"]
        == "rule_removal"
    )
    # Nothing widened yet: the rule is in force with the lowered limit.
    now_rules = {r["id"]: r for r in call(server, "get", "/rules", reader).json()["rules"]}
    assert (now_rules[rule["id"]]["limitUsd"], now_rules[rule["id"]]["version"]) == ("80.00", 2)

    problem(
        call(server, "patch", f"/rules/{deny.json()['id']}", writer, body={"limitUsd": "1"}),
        400,
        "rule_rejected",
    )
    problem(call(server, "patch", path, writer, body={"limitUsd": "-1"}), 400, "rule_rejected")
    problem(
        call(server, "patch", "/rules/rule_missing", writer, body={"limitUsd": "1"}), 404, "rule_not_found"
    )
    problem(call(server, "delete", "/rules/rule_missing", writer), 404, "rule_not_found")
    problem(call(server, "patch", path, reader, body={"limitUsd": "1"}), 403, "insufficient_scope")
    problem(call(server, "get", "/rules", reader, agent=other.agent_id), 404, "agent_not_found")


def test_a_payment_is_read_by_id_within_its_organisation(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="payer")
    other = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="their-payer")
    now = SystemClock().now()
    mine = reserve_now(db, agent.agent_id, facts("mine", host="api.example.com"), now).intent
    theirs = reserve_now(db, other.agent_id, facts("theirs", host="api.example.com"), now).intent
    assert mine is not None
    assert theirs is not None
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    one = call(server, "get", f"/payments/{mine.id}", reader)
    assert one.status_code == 200, one.text
    _matches(_described(server), one, "/payments/{payment_id}", "get")
    (listed,) = call(server, "get", "/payments", reader).json()["payments"]
    assert one.json() == listed
    problem(call(server, "get", f"/payments/{theirs.id}", reader), 404, "payment_not_found")
    problem(call(server, "get", "/payments/pay_missing", reader), 404, "payment_not_found")
    assert call(server, "get", "/payments/export", reader).status_code == 200  # not taken for an id


def test_the_catalog_pages_through_accepted_sellers(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="browser")
    start = SystemClock().now()
    made = []
    with db.write() as session:
        for n in range(3):
            entry = add_entry(
                session,
                name=f"Seller {n}",
                host=f"seller-{n}.example.com",
                url=f"https://seller-{n}.example.com/data",
                price_usd=Decimal("0.05"),
                network="eip155:84532",
                category="data",
                pay_to=[PAYEE],
                actor="test",
                now=start + timedelta(seconds=n),
            )
            made.append(entry.id)
        candidate = add_entry(
            session,
            name="Waiting",
            host="candidate.example.com",
            url="https://candidate.example.com/x",
            price_usd=Decimal("0.01"),
            network="eip155:84532",
            category="data",
            pay_to=[PAYEE],
            actor="test",
            now=start,
            accepted=False,
        ).id
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    document = _described(server)
    first = call(server, "get", "/catalog", reader, limit=2)
    _matches(document, first, "/catalog", "get")
    assert [e["id"] for e in first.json()["entries"]] == made[:2]
    second = call(server, "get", "/catalog", reader, limit=2, cursor=first.json()["nextCursor"]).json()
    assert ([e["id"] for e in second["entries"]], second["nextCursor"]) == (made[2:], None)
    one = call(server, "get", f"/catalog/{made[0]}", reader)
    _matches(document, one, "/catalog/{entry_id}", "get")
    assert one.json() == first.json()["entries"][0]
    assert one.json()["offers"] == [
        {"network": "eip155:84532", "amountAtomic": 50_000, "amountUsd": "0.05", "payTo": None}
    ]
    assert (one.json()["status"], one.json()["pinnedPayTo"]) == ("listed", [PAYEE])
    problem(call(server, "get", f"/catalog/{candidate}", reader), 404, "catalog_entry_not_found")
    problem(call(server, "get", "/catalog", reader, cursor="nope"), 400, "invalid_cursor")
