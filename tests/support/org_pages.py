"""Fixtures and helpers for the organisation's pages (members, audit log, settings): a server on
`localhost` with a clock the test moves, an owner signed in with a software passkey, and form
posts the way the pages' forms make them."""

from __future__ import annotations

import html
from collections.abc import Iterator

import httpx
import pytest

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import Member
from server.tenancy.service import find_member
from server.vocabulary import Role
from tests.support.clocks import frozen_clock
from tests.support.oauth import Person, csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve
from tests.support.principals import OPERATOR


@pytest.fixture
def clock() -> FrozenClock:
    return frozen_clock()


@pytest.fixture
def server(sqlite_db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost", clock=clock) as running:
        yield running


@pytest.fixture
def owner(server: RunningServer, sqlite_db: Database) -> Iterator[Person]:
    person = enrolled_person(server, sqlite_db)
    yield person
    person.browser.close()


def colleague(server: RunningServer, db: Database, owner: Person, role: Role) -> Person:
    """Another member of the owner's organisation, enrolled and signed in in their own browser."""
    return enrolled_person(server, db, role=role, org_id=owner.agent.org_id)


def text_of(response: httpx.Response) -> str:
    return html.unescape(response.text)


def post_form(person: Person, page: str, action: str, fields: dict[str, str] | None = None) -> httpx.Response:
    """Post a form of `page` as its browser would: with the page's CSRF token."""
    csrf = csrf_of(person.browser.get(page).text)
    return person.browser.http.post(action, data={"csrf": csrf, **(fields or {})})


def member_row(db: Database, org_id: str, member_id: str) -> Member:
    with db.read() as session:
        return find_member(session, OPERATOR, member_id, org_id=org_id)
