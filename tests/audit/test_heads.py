"""Truncation is caught against heads kept outside the database: `audit head` prints them, the
server logs them periodically as one structured line, and `audit verify --expect-head FILE` names
a chain that no longer reaches its head."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from server.audit.jobs import LogAuditHeads
from server.kit.db import Database
from server.services import build_services
from tests.support.audit import drop_append_only_triggers, remove
from tests.support.cli import run_cli
from tests.support.paywarden import settings_for

pytestmark = pytest.mark.anyio


def two_organisations(db: Database) -> dict[str, str]:
    ids = {}
    for name in ("acme", "globex"):
        ids[name] = run_cli(db.url, "admin", "org", "create", name, "--json").json()["orgId"]
    run_cli(db.url, "admin", "team", "create", "--org", "acme", "ops", "--json").json()
    run_cli(db.url, "admin", "team", "create", "--org", "acme", "sales", "--json").json()
    return ids


def test_audit_head_prints_each_organisations_newest_event(db: Database) -> None:
    ids = two_organisations(db)
    document = run_cli(db.url, "audit", "head", "--json").json()
    by_org = {head["orgId"]: head for head in document["heads"]}
    assert set(by_org) == set(ids.values())
    assert by_org[ids["acme"]]["seq"] == 3  # org.created, then two teams
    assert by_org[ids["globex"]]["seq"] == 1
    assert all(len(head["hash"]) == 64 for head in document["heads"])
    human = run_cli(db.url, "audit", "head")
    assert human.exit_code == 0
    assert f"{ids['acme']} 3 {by_org[ids['acme']]['hash']}" in human.stdout


def test_verify_names_a_chain_cut_below_the_head_it_was_given(db: Database, tmp_path: Path) -> None:
    ids = two_organisations(db)
    head_file = tmp_path / "heads.json"
    head_file.write_text(run_cli(db.url, "audit", "head", "--json").stdout)
    assert run_cli(db.url, "audit", "verify", "--expect-head", str(head_file), "--json").json()["intact"]

    with db.write() as session:
        drop_append_only_triggers(session)
        remove(session, ids["acme"], seq_at_least=3)  # the newest event of acme is gone
    # Without the head, a shorter chain checks out; with it, the truncation is named.
    assert run_cli(db.url, "audit", "verify", "--json").json()["intact"] is True
    result = run_cli(db.url, "audit", "verify", "--expect-head", str(head_file), "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["intact"] is False
    assert report["broken"] == [
        {"orgId": ids["acme"], "seq": 3, "eventId": None, "reason": "truncated", "lastSeq": 2}
    ]


def test_verify_names_an_organisation_whose_whole_chain_is_gone(db: Database, tmp_path: Path) -> None:
    ids = two_organisations(db)
    head_file = tmp_path / "heads.json"
    head_file.write_text(run_cli(db.url, "audit", "head", "--json").stdout)
    with db.write() as session:
        drop_append_only_triggers(session)
        remove(session, ids["globex"], seq_at_least=1)
    result = run_cli(db.url, "audit", "verify", "--expect-head", str(head_file), "--json")
    assert result.exit_code == 1
    broken = json.loads(result.stdout)["broken"]
    assert broken == [
        {"orgId": ids["globex"], "seq": 1, "eventId": None, "reason": "truncated", "lastSeq": 0}
    ]


def test_an_unreadable_head_file_is_one_line(db: Database, tmp_path: Path) -> None:
    bad = tmp_path / "heads.json"
    bad.write_text('{"heads": "nope"}')
    result = run_cli(db.url, "audit", "verify", "--expect-head", str(bad))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert result.stderr.strip().count("\n") == 0


async def test_the_server_logs_the_heads_as_one_structured_line(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    two_organisations(db)
    expected = run_cli(db.url, "audit", "head", "--json").json()
    job = LogAuditHeads(db=db)
    with caplog.at_level(logging.INFO, logger="paywarden.audit"):
        assert await job.run_once() == 2
    (line,) = [record for record in caplog.records if record.name == "paywarden.audit"]
    assert line.heads == expected["heads"]  # type: ignore[attr-defined]
    assert json.loads(line.getMessage().removeprefix("audit heads ")) == expected["heads"]
    # A logged line, saved as it is, is a head file.
    saved = tmp_path / "logged.json"
    saved.write_text(json.dumps({"message": line.getMessage(), "heads": line.heads}))  # type: ignore[attr-defined]
    assert run_cli(db.url, "audit", "verify", "--expect-head", str(saved), "--json").json()["intact"]
    # It runs as a background job, under a lease like the others.
    jobs = build_services(settings_for(database_url=db.url, port=8402)).jobs
    assert any(isinstance(each, LogAuditHeads) for each in jobs)
