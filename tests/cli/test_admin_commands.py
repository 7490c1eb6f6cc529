"""The admin commands this issue adds: each prints one JSON object with --json, and refuses bad
input with one line on stderr and a non-zero exit code."""

from __future__ import annotations

import hashlib

from sqlmodel import select

from server.kit.db import Database
from server.models import AuditEvent, Member, Organization
from tests.support.cli import run_cli


def test_teams_members_and_agents_that_belong_to_them(db: Database) -> None:
    org = run_cli(db.url, "admin", "org", "create", "acme", "--monthly-cap", "100", "--json").json()
    team = run_cli(db.url, "admin", "team", "create", "--org", "acme", "research", "--json").json()
    assert team["teamId"].startswith("team_")
    member = run_cli(
        db.url,
        "admin",
        "member",
        "create",
        "--org",
        org["orgId"],
        "--email",
        "Ana@Example.com",
        "--role",
        "approver",
        "--daily-cap",
        "3",
        "--json",
        public_url="https://pay.example.com",
    ).json()
    assert member["memberId"].startswith("mem_")
    assert member["email"] == "ana@example.com"
    token = member["enrollUrl"].removeprefix("https://pay.example.com/enroll/")
    assert token.startswith("pw_en_")
    with db.read() as session:
        row = session.get(Member, member["memberId"])
        assert row is not None
        assert row.enroll_token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert token not in str(session.exec(select(AuditEvent)).all())
    agent = run_cli(
        db.url,
        "admin",
        "agent",
        "create",
        "--org",
        "acme",
        "--name",
        "bot",
        "--team",
        "research",
        "--member",
        "ana@example.com",
        "--json",
    ).json()
    assert (agent["teamId"], agent["memberId"]) == (team["teamId"], member["memberId"])

    rules = run_cli(db.url, "admin", "rule", "list", "--org", "acme", "--json").json()["rules"]
    summary = sorted((r["scope"], r["window"], r["limitUsd"], r["source"]) for r in rules)
    assert summary == [
        ("agent", "week", "50.00", "default"),  # 5 x the new agent's daily cap of 10.00
        ("member", "day", "3.00", "admin"),
        ("org", "month", "100.00", "admin"),
    ]

    bad = run_cli(
        db.url, "admin", "member", "create", "--org", "acme", "--email", "b@example.com", "--role", "boss"
    )
    assert bad.exit_code != 0
    assert bad.stderr.count("\n") == 1
    assert "role" in bad.stderr
    again = run_cli(
        db.url, "admin", "member", "create", "--org", "acme", "--email", "ana@example.com", "--role", "viewer"
    )
    assert again.exit_code != 0
    assert "name_taken" in again.stderr


def test_rules_are_added_changed_and_removed_as_versions(db: Database) -> None:
    org = run_cli(db.url, "admin", "org", "create", "rules-org", "--json").json()
    added = run_cli(
        db.url,
        "admin",
        "rule",
        "add",
        "--scope",
        "org",
        "--id",
        org["orgId"],
        "--kind",
        "limit",
        "--limit-usd",
        "5",
        "--window",
        "week",
        "--host",
        "*.Example.com",
        "--json",
    ).json()
    assert (added["version"], added["host"], added["limitUsd"]) == (1, "*.example.com", "5.00")
    changed = run_cli(db.url, "admin", "rule", "set", added["ruleId"], "--limit-usd", "7", "--json").json()
    assert (changed["version"], changed["limitUsd"]) == (2, "7.00")
    removed = run_cli(db.url, "admin", "rule", "remove", added["ruleId"], "--json").json()
    assert (removed["version"], removed["removed"]) == (3, True)
    assert run_cli(db.url, "admin", "rule", "list", "--org", "rules-org", "--json").json()["rules"] == []
    with db.read() as session:
        types = [e.type for e in session.exec(select(AuditEvent).where(AuditEvent.org_id == org["orgId"]))]
    assert types.count("policy.rule_added") == 1
    assert types.count("policy.rule_changed") == 1
    assert types.count("policy.rule_removed") == 1

    for args, expected in (
        (("--kind", "deny", "--limit-usd", "1"), "limit_on_non_limit_rule"),
        (("--kind", "limit"), "invalid_limit"),
        (("--kind", "limit", "--limit-usd", "1", "--window", "year"), "invalid_window"),
        (("--kind", "deny", "--path-prefix", "v1"), "invalid_path_prefix"),
        (("--kind", "allow"), "invalid_kind"),
    ):
        result = run_cli(db.url, "admin", "rule", "add", "--scope", "org", "--id", org["orgId"], *args)
        assert result.exit_code != 0
        assert f"rule_rejected: The rule was not added. See reason and fields. ({expected})" in result.stderr
    missing = run_cli(
        db.url, "admin", "rule", "add", "--scope", "team", "--id", "team_nope", "--kind", "deny"
    )
    assert "scope_not_found" in missing.stderr


def test_organisation_settings_and_the_catalog(db: Database) -> None:
    run_cli(db.url, "admin", "org", "create", "settings-org", "--json").json()
    assert (
        run_cli(db.url, "admin", "org", "set", "settings-org", "--approval-ttl", "3600", "--json").json()[
            "approvalTtlSeconds"
        ]
        == 3600
    )
    with db.read() as session:
        org = session.exec(select(Organization).where(Organization.name == "settings-org")).one()
        assert org.approval_ttl_seconds == 3600
    for ttl in ("299", "86401"):
        assert run_cli(db.url, "admin", "org", "set", "settings-org", "--approval-ttl", ttl).exit_code != 0

    entry = run_cli(
        db.url,
        "admin",
        "catalog",
        "add",
        "--name",
        "Search",
        "--host",
        "API.Search.example",
        "--url",
        "https://api.search.example/v1/q",
        "--price",
        "0.007",
        "--network",
        "eip155:8453",
        "--category",
        "search",
        "--json",
    ).json()
    assert (entry["host"], entry["payToMode"], entry["payTo"], entry["priceUsd"]) == (
        "api.search.example",
        "rotating",
        [],
        "0.007",
    )
    duplicate = run_cli(
        db.url,
        "admin",
        "catalog",
        "add",
        "--name",
        "Again",
        "--host",
        "api.search.example",
        "--url",
        "https://api.search.example/x",
        "--price",
        "1",
        "--network",
        "eip155:8453",
        "--category",
        "search",
    )
    assert "host_already_listed" in duplicate.stderr
    elsewhere = run_cli(
        db.url,
        "admin",
        "catalog",
        "add",
        "--name",
        "Off",
        "--host",
        "a.example",
        "--url",
        "https://b.example/x",
        "--price",
        "1",
        "--network",
        "eip155:8453",
        "--category",
        "search",
    )
    assert "url_not_on_host" in elsewhere.stderr
    inbox = run_cli(db.url, "admin", "approvals", "list", "--org", "settings-org", "--status", "nope")
    assert inbox.exit_code != 0
