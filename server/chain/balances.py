"""Wallet balances as a payment needs them: known before they are needed, never trusted to refuse.

One value per (network, asset, owner), per process, with a short life. A payment starts a read as
soon as it knows its wallet (concurrently with the seller's first request), and a value past half
its life is refreshed in the background, so the balance check rarely waits on the RPC. What this
process signs away is taken off the value at once (and off a read that was already on its way), so
a value only errs by what another process or an outside transfer moved within its life; the
seller's facilitator, which settles on the chain, has the last word either way.

A value that says the wallet cannot pay is never the reason for a refusal: the caller reads again
(`read`) and refuses only on that fresh answer. No RPC, or no answer: None, as ChainService says.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

Key = tuple[str, str, str]  # network, asset (lower-case), owner (lower-case)
Reader = Callable[..., Awaitable[int | None]]


@dataclass
class _Known:
    read_at: float  # when the read that gave it started (monotonic seconds)
    value: int


class BalanceCache:
    def __init__(
        self, read: Reader, *, life_s: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._read = read  # ChainService.balance(network=, asset=, owner=)
        self._life_s = life_s
        self._now = monotonic
        self._known: dict[Key, _Known] = {}
        self._spent: dict[Key, int] = {}  # what this process signed away, per key, ever
        self._reading: dict[Key, tuple[asyncio.AbstractEventLoop, asyncio.Task[int | None]]] = {}

    @staticmethod
    def key(network: str, asset: str, owner: str) -> Key:
        return (network, asset.lower(), owner.lower())

    def known(self, *, network: str, asset: str, owner: str) -> int | None:
        """The value while it lives (None: none, or too old); past half its life, a read in the
        background brings the next one."""
        key = self.key(network, asset, owner)
        entry = self._known.get(key)
        if entry is None or self._life_s <= 0:
            return None
        age = self._now() - entry.read_at
        if age > self._life_s:
            return None
        if age > self._life_s / 2:
            self.prefetch(network=network, asset=asset, owner=owner)
        return entry.value

    def prefetch(self, *, network: str, asset: str, owner: str) -> None:
        """Start a read in the background unless one is on its way."""
        self._start(self.key(network, asset, owner))

    async def read(self, *, network: str, asset: str, owner: str) -> int | None:
        """A fresh answer from the chain: the read on its way if one is, else a new one."""
        task = self._start(self.key(network, asset, owner))
        return await asyncio.shield(task)

    def spent(self, *, network: str, asset: str, owner: str, amount: int) -> None:
        """This process signed `amount` away from the wallet: take it off what is known."""
        key = self.key(network, asset, owner)
        self._spent[key] = self._spent.get(key, 0) + amount
        entry = self._known.get(key)
        if entry is not None:
            entry.value = max(entry.value - amount, 0)

    def _start(self, key: Key) -> asyncio.Task[int | None]:
        loop = asyncio.get_running_loop()
        running = self._reading.get(key)
        if running is not None and running[0] is loop and not running[1].done():
            return running[1]
        task = loop.create_task(self._fetch(key, self._now(), self._spent.get(key, 0)))
        self._reading[key] = (loop, task)
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    def _forget(self, key: Key, task: asyncio.Task[int | None]) -> None:
        running = self._reading.get(key)
        if running is not None and running[1] is task:
            del self._reading[key]
        if not task.cancelled():
            task.exception()  # retrieved: a failed background read is only a miss

    async def _fetch(self, key: Key, started: float, spent_before: int) -> int | None:
        network, asset, owner = key
        value = await self._read(network=network, asset=asset, owner=owner)
        if value is None:
            self._known.pop(key, None)
            return None
        # What was signed away while the read was on its way may not be in its answer yet: it is
        # taken off what is kept (which errs low, and so only makes the next check read again),
        # never off the answer, which is the chain's own.
        kept = max(value - (self._spent.get(key, 0) - spent_before), 0)
        entry = self._known.get(key)
        if entry is None or entry.read_at <= started:
            self._known[key] = _Known(started, kept)
        return value
