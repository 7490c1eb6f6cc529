"""A process that is stopping (server/kit/stopping.py): /mcp refuses what still reaches it with
503 and Retry-After, and the stop reaches every app of the process, from any thread."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import httpx
import pytest

from server.kit.db import Database
from server.kit.stopping import Stopping, announce, watching
from tests.support.paywarden import serve

pytestmark = pytest.mark.anyio


def test_a_stopping_process_answers_new_mcp_requests_503_with_retry_after(sqlite_db: Database) -> None:
    with serve(sqlite_db.url) as server:
        before = httpx.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert before.status_code == 401  # served as usual: no token
        server.services.stopping.begin()
        after = httpx.post(server.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert after.status_code == 503
        assert after.headers["retry-after"] == "1"
        assert after.json()["error"] == "shutting_down"
        # Health is not refused: only calls are.
        assert httpx.get(f"{server.base_url}/healthz").status_code == 200


async def test_announce_wakes_a_wait_of_every_watched_app_and_no_other() -> None:
    watched, other = Stopping(), Stopping()
    watched.bind()
    other.bind()
    woke = anyio.Event()

    async def waiting() -> None:
        await watched.wait()
        woke.set()

    with watching(watched):
        async with anyio.create_task_group() as group:
            group.start_soon(waiting)
            await anyio.lowlevel.checkpoint()
            assert not woke.is_set()
            # From another thread: it must reach the loop all the same.
            thread = threading.Thread(target=announce)
            thread.start()
            thread.join()
            with anyio.fail_after(2):
                await woke.wait()
    assert watched.begun
    assert not other.begun
    announce()  # no longer watched: nothing changes
    assert not other.begun


async def test_a_wait_begun_after_the_stop_returns_at_once() -> None:
    stopping = Stopping()
    stopping.begin()
    with anyio.fail_after(1):
        await stopping.wait()
