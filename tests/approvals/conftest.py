"""Fixtures for the approval page's tests: a server on `localhost` (passkeys need a host name)
with a clock the test moves, and an owner enrolled with a software passkey."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.kit.clock import FrozenClock
from server.kit.db import Database
from tests.support.clocks import frozen_clock
from tests.support.oauth import Person, enrolled_person
from tests.support.paywarden import RunningServer, serve


@pytest.fixture
def clock() -> FrozenClock:
    """Starts at the real time and moves only when the test says so."""
    return frozen_clock()


@pytest.fixture
def server(db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(db.url, public_host="localhost", clock=clock) as running:
        yield running


@pytest.fixture
def owner(server: RunningServer, db: Database) -> Iterator[Person]:
    person = enrolled_person(server, db)
    yield person
    person.browser.close()
