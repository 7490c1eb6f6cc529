"""Calls started at the same moment, each in a thread of its own, for tests of what two writers at
once leave behind."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
JOIN_TIMEOUT_S = 120


def at_once(*calls: Callable[[], T]) -> list[T | BaseException]:
    """What each call returned or raised, in the order given; every thread is released together."""
    start = threading.Barrier(len(calls))
    outcomes: list[T | BaseException] = [RuntimeError("did not finish")] * len(calls)

    def run(index: int, call: Callable[[], T]) -> None:
        start.wait()
        try:
            outcomes[index] = call()
        except BaseException as exc:  # the caller asserts on every outcome
            outcomes[index] = exc

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=JOIN_TIMEOUT_S)
    return outcomes
