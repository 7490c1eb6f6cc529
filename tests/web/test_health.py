"""/readyz: ready only while the database answers and its schema is the code's own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import text
from starlette.applications import Starlette
from starlette.routing import Route

from server.kit.db import Database
from server.kit.migrations import alembic_config, head_revision
from server.web import health
from tests.support.chain import free_port
from tests.support.paywarden import RunningServer, serve

pytestmark = pytest.mark.anyio


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url) as running:
        yield running


def _set_version(db: Database, revision: str) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": revision})


def test_ready_turns_unavailable_while_the_schema_is_behind(server: RunningServer, db: Database) -> None:
    ready = httpx.get(f"{server.base_url}/readyz", timeout=10)
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready"}

    head = head_revision()
    previous = ScriptDirectory.from_config(alembic_config()).get_revision(head).down_revision
    assert isinstance(previous, str)
    _set_version(db, previous)  # as a database one migration behind the code reads
    try:
        behind = httpx.get(f"{server.base_url}/readyz", timeout=10)
        assert behind.status_code == 503
        assert behind.json() == {"status": "unavailable", "database": "schema_behind"}
        assert httpx.get(f"{server.base_url}/healthz", timeout=10).status_code == 200  # still alive
    finally:
        _set_version(db, head)
    assert httpx.get(f"{server.base_url}/readyz", timeout=10).status_code == 200


@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
async def test_ready_is_unavailable_when_the_database_does_not_answer(kind: str, tmp_path: Path) -> None:
    url = (
        f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test?connect_timeout=2"
        if kind == "postgres"
        else f"sqlite:///{tmp_path}/no/such/folder/paywarden.db"
    )
    db = Database(url)
    app = Starlette(routes=[Route("/readyz", health.readyz(db))])  # type: ignore[arg-type]
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
            answer = await client.get("/readyz")
    finally:
        db.dispose()
    assert answer.status_code == 503
    assert answer.json() == {"status": "unavailable", "database": "unreachable"}
