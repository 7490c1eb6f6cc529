"""A process that is stopping (server/kit/stopping.py): the stop reaches every app watching it,
from any thread, and a wait that begins after it returns at once."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from server.kit.stopping import Stopping, announce, watching

pytestmark = pytest.mark.anyio


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


async def test_a_bounded_scope_runs_its_work_until_the_stop_then_only_as_long_as_it_was_given() -> None:
    stopping = Stopping()
    stopping.bind()
    with stopping.bounded(0.2) as untouched:
        await anyio.sleep(0.3)  # no stop: longer than the bound, and not cut
    assert not untouched.cancelled_caught

    started = anyio.current_time()
    with stopping.bounded(0.2) as cut:
        stopping.begin()
        await anyio.sleep(5)
    assert cut.cancelled_caught
    assert 0.15 <= anyio.current_time() - started < 2

    # Entered after the stop: its bound counts from the stop.
    with stopping.bounded(0.2) as late:
        await anyio.sleep(5)
    assert late.cancelled_caught
