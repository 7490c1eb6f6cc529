"""The backup procedure of docs/operations.md, on PostgreSQL with its own tools: heads exported
with `paywarden audit head --json`, a `pg_dump` in the custom format, `pg_restore` into a fresh
database, and `paywarden audit verify --expect-head` against the restored database. A restore of
a dump taken before the last events is reported as truncated.

PostgreSQL is the subject (SQLite is copied as a file), so this runs on PostgreSQL only; without
it, or without `pg_dump` and `pg_restore`, it skips (and fails under PAYWARDEN_REQUIRE_ALL_TESTS=1).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from server.kit.db import Database
from tests.support.cli import paywarden, run_cli
from tests.support.databases import fresh_postgres, migrated_database
from tests.support.plugin import require

TOOL_TIMEOUT_S = 120


def libpq_url(url: str) -> str:
    """What pg_dump and pg_restore take: the URL without SQLAlchemy's driver name."""
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        require(f"{name} not found: install the PostgreSQL client (apt-get install postgresql-client)")
    return found


def dump(url: str, target: Path) -> None:
    subprocess.run(
        [tool("pg_dump"), "--format=custom", f"--file={target}", libpq_url(url)],
        check=True,
        capture_output=True,
        timeout=TOOL_TIMEOUT_S,
    )


def restore(source: Path, url: str) -> None:
    subprocess.run(
        [tool("pg_restore"), "--no-owner", "--exit-on-error", f"--dbname={libpq_url(url)}", str(source)],
        check=True,
        capture_output=True,
        timeout=TOOL_TIMEOUT_S,
    )


def change_policies(db: Database, agent_id: str, *caps: str) -> None:
    for cap in caps:
        run_cli(db.url, "admin", "policy", "set", agent_id, "--daily-cap", cap, "--json").json()


@pytest.fixture(name="source")
def fixture_source(tmp_path: Path) -> Iterator[Database]:
    """The production database: PostgreSQL (a skip, or a failure when all tests are required)."""
    with migrated_database("postgres", tmp_path) as database:
        yield database


def test_a_restored_dump_reaches_the_heads_exported_before_it_and_an_older_one_is_truncated(
    source: Database, tmp_path: Path
) -> None:
    db = source
    tool("pg_dump")
    tool("pg_restore")
    org = run_cli(db.url, "admin", "org", "create", "acme", "--json").json()["orgId"]
    run_cli(db.url, "admin", "team", "create", "--org", "acme", "ops", "--json").json()
    agent = run_cli(db.url, "admin", "agent", "create", "--org", "acme", "--name", "researcher", "--json")
    agent_id = agent.json()["agentId"]
    change_policies(db, agent_id, "2.00", "3.00")
    run_cli(db.url, "admin", "org", "create", "globex", "--json").json()

    # An older dump, before the last policy changes of acme.
    older = tmp_path / "older.dump"
    dump(db.url, older)
    change_policies(db, agent_id, "4.00", "5.00")

    # The procedure: heads first, kept apart; then the dump.
    heads = tmp_path / "heads.json"
    exported = run_cli(db.url, "audit", "head", "--json")
    heads.write_text(exported.stdout)
    acme_head = next(head for head in exported.json()["heads"] if head["orgId"] == org)
    newest = tmp_path / "newest.dump"
    dump(db.url, newest)

    with fresh_postgres() as restored_url:
        restore(newest, restored_url)
        checked = paywarden(
            "audit", "verify", "--expect-head", str(heads), "--json", cwd=tmp_path, database_url=restored_url
        )
        assert checked.code == 0, checked.stderr
        report = checked.json()
        assert report["intact"] is True
        assert report["checked"] == 2

    with fresh_postgres() as restored_url:
        restore(older, restored_url)
        checked = paywarden(
            "audit", "verify", "--expect-head", str(heads), "--json", cwd=tmp_path, database_url=restored_url
        )
        assert checked.code == 1, checked.stderr
        report = json.loads(checked.stdout)
        assert report["intact"] is False
        # Two policy changes (one audit event each) are missing from the older dump.
        assert report["broken"] == [
            {
                "orgId": org,
                "seq": acme_head["seq"],
                "eventId": None,
                "reason": "truncated",
                "lastSeq": acme_head["seq"] - 2,
            }
        ]
