"""A narrower consent is the only consent: connecting the same client to the same agent again with
fewer scopes narrows every earlier sign-in of that connection (its refresh families, their access
tokens and any code not exchanged yet), even when a refresh runs at the same moment; revoking the
connection ends every family. On SQLite and PostgreSQL, through the real server and OAuth flow."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlmodel import select

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AccessToken, AuditEvent
from tests.support.oauth import (
    Person,
    authorization_params,
    call_tool,
    code_of,
    connect,
    csrf_of,
    enrolled_person,
    exchange,
    pkce,
    refresh_with,
    register,
)
from tests.support.paywarden import RunningServer, serve

WIDE = ["catalog:read", "payments:read", "payments:write", "rules:propose"]
NARROW = ["payments:read"]


@pytest.fixture
def server_on(db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    with serve(db.url, public_host="localhost", clock=clock) as running:
        yield running


@pytest.fixture
def person(server_on: RunningServer, db: Database) -> Iterator[Person]:
    member = enrolled_person(server_on, db)
    yield member
    member.browser.close()


def _refused_for_scope(server: RunningServer, access_token: str) -> None:
    answer = call_tool(server.settings.mcp_url, access_token, "propose_rule")
    assert answer.status_code == 403, answer.text[:300]
    assert answer.json()["error"]["data"]["error"]["code"] == "insufficient_scope"


def _live_scopes(db: Database, grant_ids: set[str]) -> set[str]:
    with db.read() as session:
        rows = session.exec(select(AccessToken).where(AccessToken.revoked_at.is_(None))).all()  # type: ignore[union-attr]
    return {row.scopes for row in rows if row.grant_id in grant_ids}


def test_a_narrower_consent_narrows_the_first_sign_in(
    server_on: RunningServer, person: Person, db: Database
) -> None:
    server = server_on
    client, first = connect(server, person, scopes=WIDE)
    assert first["scope"] == " ".join(WIDE)
    # A code consented to widely but not exchanged yet.
    pending = pkce()
    page = person.browser.authorize(authorization_params(client["client_id"], pending))
    pending_code = code_of(person.browser.consent(page, scopes=WIDE))

    _, second = connect(server, person, client=client, scopes=NARROW)
    assert second["scope"] == "payments:read"

    refreshed = refresh_with(server, client["client_id"], first["refresh_token"])
    assert refreshed.status_code == 200, refreshed.text
    assert refreshed.json()["scope"] == "payments:read"
    _refused_for_scope(server, refreshed.json()["access_token"])
    # The first sign-in's access token, issued before the narrower consent, is narrowed too.
    _refused_for_scope(server, first["access_token"])
    late = exchange(server, client["client_id"], pending_code, pending.verifier)
    assert late.status_code == 200, late.text
    assert late.json()["scope"] == "payments:read"
    _refused_for_scope(server, late.json()["access_token"])
    # Asking a refresh for a scope the connection no longer has is refused.
    wider = refresh_with(
        server, client["client_id"], refreshed.json()["refresh_token"], scope="rules:propose"
    )
    assert wider.json()["error"] == "invalid_grant"

    with db.read() as session:
        narrowed = [e for e in session.exec(select(AuditEvent)) if e.type == "oauth.grant_narrowed"]
    assert len(narrowed) == 1
    assert narrowed[0].data["scopesRemoved"] == ["catalog:read", "payments:write", "rules:propose"]
    assert narrowed[0].data["tokensNarrowed"] == 2  # the first family's access and refresh tokens
    assert narrowed[0].data["codesNarrowed"] == 1

    # Revoking the connection ends every family at once.
    connections = person.browser.get("/connections")
    grant_id = connections.text.split('href="/connections/')[1].split("/revoke")[0]
    revoked = person.browser.http.post(
        f"/connections/{grant_id}/revoke", data={"csrf": csrf_of(connections.text)}
    )
    assert revoked.status_code == 303
    for token in (second["refresh_token"], late.json()["refresh_token"]):
        assert refresh_with(server, client["client_id"], token).json()["error"] == "invalid_grant"
    assert _live_scopes(db, {grant_id}) == set()


def _race_once(server: RunningServer, person: Person, client: dict[str, Any]) -> dict[str, httpx.Response]:
    """A wide sign-in, then its refresh and a narrower consent sent at the same moment."""
    _, wide = connect(server, person, client=client, scopes=WIDE)
    page = person.browser.authorize(authorization_params(client["client_id"], pkce()))
    assert page.status_code == 200
    answers: dict[str, httpx.Response] = {}
    start = threading.Barrier(2)

    def refresh() -> None:
        start.wait(timeout=10)
        answers["refresh"] = refresh_with(server, client["client_id"], wide["refresh_token"])

    def narrow() -> None:
        start.wait(timeout=10)
        answers["consent"] = person.browser.consent(page, scopes=NARROW)

    threads = [threading.Thread(target=refresh), threading.Thread(target=narrow)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return answers


def test_a_refresh_racing_a_narrower_consent_never_keeps_the_wider_scopes(
    server_on: RunningServer, person: Person, db: Database
) -> None:
    server = server_on
    client = register(server, client_name="Racing client")
    for _round in range(3):
        answers = _race_once(server, person, client)
        assert answers["consent"].status_code in (302, 303), answers["consent"].text[:300]
        assert answers["refresh"].status_code == 200, answers["refresh"].text
        # Whichever came first, the refreshed token carries no scope the connection lost.
        _refused_for_scope(server, answers["refresh"].json()["access_token"])
        with db.read() as session:
            tokens = session.exec(select(AccessToken)).all()
        grant_ids = {row.grant_id for row in tokens if row.grant_id is not None}
        assert _live_scopes(db, grant_ids) <= {"payments:read"}
