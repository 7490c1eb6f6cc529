"""The per-process wallet balance cache: a value lives a short while, is refreshed before it dies,
loses at once what this process signed away, and a read joins the one on its way. The reader is a
stand-in for ChainService.balance (an int, or None when the chain cannot be asked)."""

from __future__ import annotations

import asyncio

import pytest

from server.chain.balances import BalanceCache

pytestmark = pytest.mark.anyio

WHERE = {"network": "eip155:84532", "asset": "0xAsset", "owner": "0xOwner"}


class Chain:
    """Balances on a chain that answers when told to (so a read can be caught on its way)."""

    def __init__(self, balance: int | None) -> None:
        self.balance = balance
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def read(self, *, network: str, asset: str, owner: str) -> int | None:
        assert (network, asset, owner) == ("eip155:84532", "0xasset", "0xowner")
        self.reads += 1
        if self.gate is not None:
            await self.gate.wait()
        return self.balance


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_value_lives_its_life_and_is_refreshed_before_it_dies() -> None:
    chain, clock = Chain(50_000), Clock()
    cache = BalanceCache(chain.read, life_s=4.0, monotonic=clock)
    assert cache.known(**WHERE) is None
    assert await cache.read(**WHERE) == 50_000
    clock.now += 1.0
    assert cache.known(**WHERE) == 50_000
    assert chain.reads == 1
    chain.balance = 70_000
    clock.now += 1.5  # past half its life: still good, and a read goes out behind it
    assert cache.known(**WHERE) == 50_000
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert chain.reads == 2
    assert cache.known(**WHERE) == 70_000
    clock.now += 4.5  # dead
    assert cache.known(**WHERE) is None


async def test_what_the_process_signs_away_is_taken_off_at_once_and_off_a_read_on_its_way() -> None:
    chain, clock = Chain(30_000), Clock()
    cache = BalanceCache(chain.read, life_s=5.0, monotonic=clock)
    assert await cache.read(**WHERE) == 30_000
    cache.spent(**WHERE, amount=10_000)
    assert cache.known(**WHERE) == 20_000
    # A read that left before a payment was signed may answer without it: kept without it too,
    # while the read itself answers the chain's own number.
    chain.gate = asyncio.Event()
    cache.prefetch(**WHERE)  # on its way from here
    cache.spent(**WHERE, amount=10_000)
    reading = asyncio.ensure_future(cache.read(**WHERE))
    await asyncio.sleep(0)  # the read joins the one on its way, still held at the gate
    assert chain.reads == 2
    chain.gate.set()
    assert await reading == 30_000
    assert cache.known(**WHERE) == 20_000
    cache.spent(**WHERE, amount=25_000)
    assert cache.known(**WHERE) == 0


async def test_reads_join_the_one_on_its_way_and_no_answer_forgets() -> None:
    chain, clock = Chain(10), Clock()
    cache = BalanceCache(chain.read, life_s=5.0, monotonic=clock)
    chain.gate = asyncio.Event()
    cache.prefetch(**WHERE)
    first = asyncio.ensure_future(cache.read(**WHERE))
    second = asyncio.ensure_future(cache.read(**WHERE))
    await asyncio.sleep(0)
    chain.gate.set()
    assert (await first, await second) == (10, 10)
    assert chain.reads == 1
    chain.gate = None
    chain.balance = None  # the RPC stops answering: nothing is known, nothing is guessed
    assert await cache.read(**WHERE) is None
    assert cache.known(**WHERE) is None


async def test_a_life_of_zero_keeps_nothing() -> None:
    chain = Chain(10)
    cache = BalanceCache(chain.read, life_s=0.0)
    assert await cache.read(**WHERE) == 10
    assert cache.known(**WHERE) is None
