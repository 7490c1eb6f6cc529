"""Credentials stay out of the access log, and an enrolment link lives only as long as its
setting says (24 hours by default)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import httpx

from server.kit.clock import SystemClock
from server.kit.db import Database
from tests.support.cli import run_cli
from tests.support.clocks import frozen_clock
from tests.support.oauth import enrollment_link_token
from tests.support.paywarden import serve, settings_for
from tests.support.processes import serve_processes
from tests.support.tenants import make_agent, make_member


def test_the_access_log_never_shows_an_enrolment_token_or_a_credential(
    sqlite_db: Database, tmp_path: Path
) -> None:
    with serve_processes(
        1, database_url=sqlite_db.url, extra={}, workdir=tmp_path, public_host="localhost"
    ) as (_, processes):
        process = processes[0]
        settings = settings_for(database_url=sqlite_db.url, port=process.port, public_host="localhost")
        org_id = make_agent(sqlite_db, settings, allow_hosts=["api.example.com"]).org_id
        member_id = make_member(sqlite_db, org_id)
        token = enrollment_link_token(sqlite_db, member_id, org_id, clock=SystemClock())
        host = {"Host": f"localhost:{process.port}"}
        page = httpx.get(f"{process.base_url}/enroll/{token}", headers=host, timeout=15)
        assert page.status_code == 200
        httpx.post(f"{process.base_url}/enroll/{token}/options", json={}, headers=host, timeout=15)
        httpx.get(
            f"{process.base_url}/oauth/authorize",
            params={"code": "the-authorization-code", "token": "pw_at_a-token", "client_id": "c"},
            headers=host,
            timeout=15,
        )
        output = process.output()
    assert "GET /enroll/[redacted] HTTP/1.1" in output, output
    assert "POST /enroll/[redacted]/options HTTP/1.1" in output, output
    assert "code=[redacted]" in output, output
    assert "client_id=c" in output
    assert token not in output
    assert token.removeprefix("pw_en_") not in output
    assert "the-authorization-code" not in output
    assert "pw_at_a-token" not in output


def test_an_enrolment_link_older_than_a_day_is_refused(sqlite_db: Database) -> None:
    clock = frozen_clock()
    with serve(sqlite_db.url, public_host="localhost", clock=clock) as running:
        org_id = make_agent(sqlite_db, running.settings, allow_hosts=["api.example.com"], clock=clock).org_id
        member_id = make_member(sqlite_db, org_id, clock=clock)
        token = enrollment_link_token(sqlite_db, member_id, org_id, clock=clock)
        host = {"Host": f"localhost:{running.port}"}
        clock.advance(24 * 3600 - 60)
        assert httpx.get(f"{running.base_url}/enroll/{token}", headers=host).status_code == 200
        clock.advance(120)
        refused = httpx.get(f"{running.base_url}/enroll/{token}", headers=host)
    assert refused.status_code == 410
    assert "This enrolment link has expired" in refused.text


def test_the_enrolment_link_lifetime_is_a_setting(sqlite_db: Database) -> None:
    environ = {"PAYWARDEN_ENROLL_TTL": "3600"}
    run_cli(sqlite_db.url, "admin", "org", "create", "acme", env=environ)
    created = run_cli(
        sqlite_db.url,
        "admin",
        "member",
        "create",
        "--org",
        "acme",
        "--email",
        "ana@example.com",
        "--role",
        "admin",
        env=environ,
    )
    assert created.exit_code == 0, created.stderr
    before = datetime.now().astimezone()
    link = run_cli(
        sqlite_db.url,
        "admin",
        "member",
        "enroll-link",
        "ana@example.com",
        "--org",
        "acme",
        "--json",
        env=environ,
    ).json()
    lifetime = datetime.fromisoformat(link["expiresAt"]) - before
    assert 3590 <= lifetime.total_seconds() <= 3610
