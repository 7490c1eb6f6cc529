"""`paywarden admin payments list|export` and `admin agent list|show`: an organisation's payments,
newest first, filtered, exported whole as CSV or JSON. The CSV, read back with Python's `csv`
module, matches what the agent's own `list_payments` tool says, row for row; another
organisation's payments never appear."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest

from server.kit.clock import SystemClock
from server.kit.db import Database
from tests.support.cli import run_cli
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import mcp_client, serve, settings_for, structured
from tests.support.tenants import AgentSetup, make_agent


def _pay(db: Database, agent: AgentSetup, count: int, prefix: str) -> list[str]:
    now = SystemClock().now()
    made = [reserve_now(db, agent.agent_id, facts(f"{prefix}-{n}"), now).intent for n in range(count)]
    assert all(intent is not None for intent in made)
    return [intent.id for intent in made if intent is not None]


def _export(db: Database, *args: str) -> list[dict[str, str]]:
    done = run_cli(db.url, "admin", "payments", "export", *args)
    assert done.exit_code == 0, done.stderr
    return list(csv.DictReader(io.StringIO(done.stdout)))


@pytest.fixture
def world(db: Database) -> dict[str, Any]:
    settings = settings_for(database_url=db.url, port=8402)
    a1 = make_agent(db, settings, allow_hosts=["api.example.com"], name="a1", org_name="acme")
    a2 = make_agent(db, settings, allow_hosts=["api.example.com"], org_id=a1.org_id, name="a2")
    b1 = make_agent(db, settings, allow_hosts=["api.example.com"], name="b1")
    return {
        "a1": a1,
        "a2": a2,
        "b1": b1,
        "paid_a1": _pay(db, a1, 3, "a1"),
        "paid_a2": _pay(db, a2, 2, "a2"),
        "paid_b1": _pay(db, b1, 1, "b1"),
    }


def test_the_export_is_the_organisations_payments_and_nothing_else(
    db: Database, world: dict[str, Any]
) -> None:
    org = world["a1"].org_id
    rows = _export(db, "--org", org, "--format", "csv")
    assert sorted(row["intentId"] for row in rows) == sorted(world["paid_a1"] + world["paid_a2"])
    assert list(rows[0]) == [
        "intentId", "agentId", "createdAt", "status", "host", "payTo",
        "amountUsd", "amountAtomic", "network", "transaction",
    ]  # fmt: skip
    order = [(row["createdAt"], row["intentId"]) for row in rows]
    assert order == sorted(order, reverse=True)
    only_a2 = _export(db, "--org", "acme", "--format", "csv", "--agent", world["a2"].agent_id)
    assert sorted(row["intentId"] for row in only_a2) == sorted(world["paid_a2"])
    as_json = run_cli(db.url, "admin", "payments", "export", "--org", org, "--format", "json").json()
    listed = run_cli(db.url, "admin", "payments", "list", "--org", org, "--limit", "100", "--json").json()
    assert as_json == listed
    assert [
        {key: str(value) if value is not None else "" for key, value in item.items()}
        for item in as_json["payments"]
    ] == rows
    # Another organisation's agent is not a filter of this one.
    refused = run_cli(
        db.url,
        "admin",
        "payments",
        "export",
        "--org",
        org,
        "--format",
        "csv",
        "--agent",
        world["b1"].agent_id,
    )
    assert refused.exit_code != 0
    assert "not in organisation" in refused.stderr


def test_a_window_and_bad_filters(db: Database, world: dict[str, Any]) -> None:
    org = world["a1"].org_id
    assert _export(db, "--org", org, "--format", "csv", "--until", "2000-01-01") == []
    assert len(_export(db, "--org", org, "--format", "csv", "--since", "2000-01-01")) == 5
    bad_time = run_cli(db.url, "admin", "payments", "list", "--org", org, "--since", "yesterday")
    assert bad_time.exit_code != 0
    assert "ISO 8601" in bad_time.stderr
    bad_status = run_cli(db.url, "admin", "payments", "list", "--org", org, "--status", "paidish")
    assert bad_status.exit_code != 0
    assert "settled" in bad_status.stderr  # the valid values are listed


def test_agents_are_listed_and_shown(db: Database, world: dict[str, Any]) -> None:
    listed = run_cli(db.url, "admin", "agent", "list", "--org", "acme", "--json").json()
    assert [agent["name"] for agent in listed["agents"]] == ["a1", "a2"]
    shown = run_cli(db.url, "admin", "agent", "show", world["a1"].agent_id, "--json").json()
    assert (shown["name"], shown["disabled"]) == ("a1", False)
    assert shown["policyVersion"] >= 1
    human = run_cli(db.url, "admin", "agent", "list", "--org", "acme")
    assert world["a2"].agent_id in human.stdout


@pytest.mark.anyio
async def test_the_csv_matches_the_agents_list_payments_row_for_row(db: Database) -> None:
    with serve(db.url) as server:
        agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="told")
        _pay(db, agent, 3, "told")
        rows = _export(db, "--org", agent.org_id, "--format", "csv", "--agent", agent.agent_id)
        async with mcp_client(server.settings.mcp_url, agent.token) as client:
            told = structured(await client.call_tool("list_payments", {"limit": 50}))["payments"]
    assert len(rows) == 3
    assert [item["intentId"] for item in told] == [row["intentId"] for row in rows]
    for item, row in zip(told, rows, strict=True):
        assert (item["status"], item["amountUsd"], item["host"], item["network"]) == (
            row["status"], row["amountUsd"], row["host"], row["network"],
        )  # fmt: skip
        assert (item["transactionHash"] or "") == row["transaction"]
