"""A process's graceful stop, as the calls in flight see it.

SIGTERM (and Ctrl-C) becomes `announce()`: every app that runs in the process registered its
`Stopping` in its lifespan (`watching`, which also puts `announce` in front of the server's own
handler for those signals), and each one learns at once that the process is going away. A call
that waits for something that may take long (a person's approval) stops waiting and answers as it
would at the end of its wait; a paid call whose seller has not answered waits only what the grace
period (PAYWARDEN_SHUTDOWN_GRACE_SECONDS) leaves it (`bounded`). Everything else is left to finish.

The signal handler runs on the event loop's thread between two steps of whatever it interrupted,
so it never touches the event itself: it schedules the change with `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import anyio

# The signals a server stops on; the handler a server (uvicorn) installed keeps running after ours.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# Of the grace period after SIGTERM, what the process keeps for itself once the calls in flight
# are done or cut off (releasing its leases, the settlement looks already started, closing its
# pools): a fifth of it, at least 1 s and at most 5 s.
MAX_RESERVE_SECONDS = 5

# Changed and copied in single steps (no lock: a signal handler must never wait for one).
_watched: set[Stopping] = set()


class Stopping:
    """Whether this app's process is stopping; set once, never cleared."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._begun = False
        self._stopped_at: float | None = None  # the event loop's clock when the stop reached it
        self._bounded: dict[anyio.CancelScope, float] = {}

    @property
    def begun(self) -> bool:
        return self._begun

    def bind(self) -> None:
        """Attach to the running event loop (the app's lifespan calls this)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        if self._begun:
            self._event.set()

    def begin(self) -> None:
        """The process is stopping. Safe from a signal handler and from any thread."""
        self._begun = True
        loop, event = self._loop, self._event
        if loop is None or event is None or loop.is_closed():
            return
        # Also from the loop's own thread: it writes to the loop's wake-up pipe, so a loop
        # blocked in its selector wakes now rather than at its next timer.
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(self._reached, loop, event)

    def _reached(self, loop: asyncio.AbstractEventLoop, event: asyncio.Event) -> None:
        """On the loop: wake the waits, and give every bounded scope its deadline."""
        if self._stopped_at is None:
            self._stopped_at = loop.time()
        for scope, after_s in list(self._bounded.items()):
            scope.deadline = min(scope.deadline, self._stopped_at + after_s)
        event.set()

    @contextlib.contextmanager
    def bounded(self, after_stop_s: float) -> Iterator[anyio.CancelScope]:
        """A cancel scope that runs as long as its work, unless the process begins to stop: then
        it ends `after_stop_s` later (`cancelled_caught` says whether it did)."""
        scope = anyio.CancelScope()
        if self._stopped_at is not None:
            scope.deadline = self._stopped_at + after_stop_s
        self._bounded[scope] = after_stop_s
        try:
            with scope:
                yield scope
        finally:
            self._bounded.pop(scope, None)

    async def wait(self) -> None:
        """Return once the process is stopping (at once if it already is)."""
        if self._begun:
            return
        if self._event is None:
            self.bind()
        assert self._event is not None
        await self._event.wait()


@contextlib.contextmanager
def watching(stopping: Stopping) -> Iterator[None]:
    """Let `announce()` reach `stopping` while the block runs; on the main thread, also announce
    on the stop signals, before the handler the server installed for them runs."""
    chained = _chain_signals() if threading.current_thread() is threading.main_thread() else {}
    _watched.add(stopping)
    try:
        yield
    finally:
        _watched.discard(stopping)
        for number, previous in chained.items():
            signal.signal(number, previous)


def announce() -> None:
    """The process is stopping: tell every app running in it."""
    for stopping in list(_watched):
        stopping.begin()


Handler = Callable[[int, FrameType | None], object]


def _chain_signals() -> dict[int, Handler]:
    """Put `announce` in front of each stop signal's handler, where a server set one (without a
    server's handler, the signal keeps its default: the process ends)."""
    chained: dict[int, Handler] = {}
    for number in STOP_SIGNALS:
        previous = signal.getsignal(number)
        if not callable(previous):
            continue
        signal.signal(number, _announcing(previous))
        chained[number] = previous
    return chained


def _announcing(previous: Handler) -> Handler:
    def handler(number: int, frame: FrameType | None) -> None:
        announce()
        previous(number, frame)

    return handler


def reserve_seconds(grace: int) -> int:
    """What the process keeps for itself, out of a grace period of `grace` seconds."""
    return max(1, min(MAX_RESERVE_SECONDS, grace // 5))


def calls_grace_seconds(grace: int) -> int:
    """How long calls in flight may run on after SIGTERM, out of a grace period of `grace`."""
    return max(grace - reserve_seconds(grace), 1)
