"""Refresh tokens rotate on every use. A token used twice outside the grace revokes its whole
family; the same token sent twice at once by one client's processes gets the same new pair, so
neither process is signed out."""

from __future__ import annotations

import threading

import httpx
from sqlmodel import select

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AuditEvent
from tests.support.oauth import Person, call_tool, connect, csrf_of, refresh_with, register, rpc_result
from tests.support.paywarden import RunningServer


def test_reusing_a_refresh_token_after_the_grace_revokes_the_family(
    server: RunningServer, owner: Person, clock: FrozenClock, sqlite_db: Database
) -> None:
    client, first = connect(server, owner)
    second = refresh_with(server, client["client_id"], first["refresh_token"]).json()
    clock.advance(server.settings.refresh_grace_seconds + 1)
    reused = refresh_with(server, client["client_id"], first["refresh_token"])
    assert reused.status_code == 400
    assert reused.json() == {
        "error": "invalid_grant",
        "error_description": "The refresh token was already used; every token of this sign-in was revoked.",
    }
    # The thief's copy and the rightful holder's newer tokens all stop working.
    assert (
        refresh_with(server, client["client_id"], second["refresh_token"]).json()["error"] == "invalid_grant"
    )
    for token in (first["access_token"], second["access_token"]):
        assert call_tool(server.settings.mcp_url, token, "get_budget").status_code == 401
    with sqlite_db.read() as session:
        reuse = [event for event in session.exec(select(AuditEvent)) if event.type == "oauth.refresh_reused"]
    assert len(reuse) == 1
    assert reuse[0].data["tokensRevoked"] == 4  # both pairs, the used refresh token included


def test_the_same_refresh_token_twice_within_the_grace_gets_the_same_pair(
    server: RunningServer, owner: Person, clock: FrozenClock
) -> None:
    client, first = connect(server, owner)
    one = refresh_with(server, client["client_id"], first["refresh_token"]).json()
    clock.advance(server.settings.refresh_grace_seconds - 1)
    two = refresh_with(server, client["client_id"], first["refresh_token"]).json()
    assert (two["access_token"], two["refresh_token"]) == (one["access_token"], one["refresh_token"])
    assert two["expires_in"] <= one["expires_in"]
    assert rpc_result(call_tool(server.settings.mcp_url, one["access_token"], "get_budget"))["result"]
    # Another client presenting it within the grace is reuse, not a parallel refresh.
    other = register(server)
    stolen = refresh_with(server, other["client_id"], first["refresh_token"])
    assert stolen.json() == {
        "error": "invalid_grant",
        "error_description": "The refresh token was issued to another client.",
    }


def test_two_concurrent_refreshes_with_one_token_both_keep_working(
    server: RunningServer, owner: Person
) -> None:
    client, first = connect(server, owner)
    answers: list[httpx.Response] = []
    start = threading.Barrier(2)

    def refresh() -> None:
        start.wait(timeout=10)
        answers.append(refresh_with(server, client["client_id"], first["refresh_token"]))

    threads = [threading.Thread(target=refresh) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [answer.status_code for answer in answers] == [200, 200], [a.text for a in answers]
    pairs = {(a.json()["access_token"], a.json()["refresh_token"]) for a in answers}
    assert len(pairs) == 1
    access, refresh_token = pairs.pop()
    assert rpc_result(call_tool(server.settings.mcp_url, access, "get_budget"))["result"]
    assert refresh_with(server, client["client_id"], refresh_token).status_code == 200


def test_a_revoked_connection_refreshes_no_more(server: RunningServer, owner: Person) -> None:
    client, tokens = connect(server, owner)
    page = owner.browser.get("/connections")
    assert "Test client" in page.text
    grant_id = page.text.split('href="/connections/')[1].split("/revoke")[0]
    revoked = owner.browser.http.post(f"/connections/{grant_id}/revoke", data={"csrf": csrf_of(page.text)})
    assert revoked.status_code == 303
    assert call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget").status_code == 401
    assert (
        refresh_with(server, client["client_id"], tokens["refresh_token"]).json()["error"] == "invalid_grant"
    )
    assert "Test client" not in owner.browser.get("/connections").text
