"""/admin/api-tokens without a browser: an owner issues a token for the admin API after sudo, sees
it once, and it opens /api/v1 until revoked; a bad choice is refused beside its field; admins and
viewers see the forms disabled and are refused; another organisation's or an agent's token cannot
be revoked from here; a post without its CSRF token is refused."""

from __future__ import annotations

import re

import httpx
import pytest

from auth.tokens import find_by_secret, live_tokens
from server.kit.db import Database
from server.vocabulary import Role
from tests.support.oauth import Person, csrf_of
from tests.support.org_pages import clock, colleague, owner, post_form, server, text_of
from tests.support.paywarden import RunningServer
from tests.support.principals import OPERATOR

__all__ = ["clock", "owner", "server"]  # fixtures
PAGE = "/admin/api-tokens"
ISSUE = {"label": "nightly export", "access": "read", "ttl_days": "30"}
SECRET = re.compile(r'<p class="code full" id="issued-token">([^<]+)</p>')
NONCE = re.compile(r'<input type="hidden" name="nonce" value="([A-Za-z0-9_-]{22})">')


def _issue(person: Person, fields: dict[str, str]) -> httpx.Response:
    """The issue form posted as the browser posts it: with the CSRF token and the one-time nonce
    of the page it was rendered on."""
    page = person.browser.get(PAGE).text
    nonce = NONCE.search(page)
    assert nonce is not None
    return person.browser.http.post(PAGE, data={"csrf": csrf_of(page), "nonce": nonce.group(1), **fields})


def _token_ids(server: RunningServer, db: Database, org_id: str) -> set[str]:
    """The organisation's tokens for the admin API that still work at the server's time."""
    with db.read() as session:
        found = live_tokens(session, OPERATOR, org_id=org_id, now=server.clock.now())
    return {live.row.id for live in found if live.row.agent_id is None}


def _api(server: RunningServer, token: str) -> httpx.Response:
    return httpx.get(f"{server.base_url}/api/v1/agents", headers={"authorization": f"Bearer {token}"})


def test_issuing_waits_for_sudo_and_issues_nothing_before(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    answer = _issue(owner, ISSUE)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/account/sudo?next=%2Fadmin%2Fapi-tokens"
    assert _token_ids(server, sqlite_db, owner.agent.org_id) == set()


def test_a_token_is_shown_once_opens_the_admin_api_and_stops_when_revoked(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    owner.browser.sudo(PAGE)
    issued = _issue(owner, {**ISSUE, "access": "write"})
    assert issued.status_code == 200, issued.text
    assert issued.headers["cache-control"] == "no-store"
    found = SECRET.search(issued.text)
    assert found is not None
    secret = found.group(1)
    assert "read and change" in text_of(issued)
    listed = owner.browser.get(PAGE)
    assert secret not in listed.text  # shown once
    assert "nightly export" in listed.text
    (token_id,) = _token_ids(server, sqlite_db, owner.agent.org_id)

    assert _api(server, secret).status_code == 200
    assert httpx.get(f"{server.base_url}/api/v1/agents").status_code == 401

    revoked = post_form(owner, PAGE, f"{PAGE}/{token_id}/revoke")
    assert revoked.status_code == 303
    assert "its next request to the admin API is refused" in text_of(
        owner.browser.get(revoked.headers["location"])
    )
    assert _api(server, secret).status_code == 401
    assert _token_ids(server, sqlite_db, owner.agent.org_id) == set()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("access", "everything", "Choose read, or read and write."),
        ("ttl_days", "3650", "Choose one of the lifetimes listed."),
        ("label", "x" * 121, "A label has at most 120 characters."),
    ],
)
def test_a_bad_choice_is_refused_beside_its_field(
    server: RunningServer, sqlite_db: Database, owner: Person, field: str, value: str, message: str
) -> None:
    owner.browser.sudo(PAGE)
    refused = _issue(owner, {**ISSUE, field: value})
    assert refused.status_code == 400
    assert message in text_of(refused)
    assert "No token was issued: correct the choices marked below." in text_of(refused)
    assert SECRET.search(refused.text) is None
    assert _token_ids(server, sqlite_db, owner.agent.org_id) == set()


@pytest.mark.parametrize("role", [Role.ADMIN, Role.VIEWER])
def test_only_an_owner_issues_or_revokes(
    server: RunningServer, sqlite_db: Database, owner: Person, role: Role
) -> None:
    owner.browser.sudo(PAGE)
    secret_page = _issue(owner, ISSUE)
    assert secret_page.status_code == 200
    (token_id,) = _token_ids(server, sqlite_db, owner.agent.org_id)
    other = colleague(server, sqlite_db, owner, role)
    try:
        page = other.browser.get(PAGE)
        assert page.status_code == 200
        assert "nightly export" in page.text  # everyone sees the list
        assert "so the forms below are disabled" in text_of(page)
        other.browser.sudo(PAGE)
        for action in (PAGE, f"{PAGE}/{token_id}/revoke"):
            answer = post_form(other, PAGE, action, ISSUE)
            assert answer.status_code == 403, action
            assert "Only an owner of your organisation can issue or revoke admin API tokens." in text_of(
                answer
            )
        assert _token_ids(server, sqlite_db, owner.agent.org_id) == {token_id}
    finally:
        other.browser.close()


def test_an_agent_token_or_another_organisations_cannot_be_revoked_here(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    from tests.support.oauth import enrolled_person

    stranger = enrolled_person(server, sqlite_db)
    try:
        stranger.browser.sudo(PAGE)
        assert _issue(stranger, ISSUE).status_code == 200
        (theirs,) = _token_ids(server, sqlite_db, stranger.agent.org_id)
    finally:
        stranger.browser.close()
    with sqlite_db.read() as session:
        row = find_by_secret(session, owner.agent.token)
        assert row is not None
        agent_token = row.id
    for token_id in (theirs, agent_token):
        answer = post_form(owner, PAGE, f"{PAGE}/{token_id}/revoke")
        assert answer.status_code == 404, token_id
    assert _token_ids(server, sqlite_db, stranger.agent.org_id) == {theirs}
    assert _api(server, owner.agent.token).status_code == 401  # an agent token never opens /api/v1


def test_a_post_without_its_csrf_token_is_refused(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    owner.browser.sudo(PAGE)
    answer = owner.browser.http.post(PAGE, data=ISSUE)
    assert answer.status_code == 403
    assert _token_ids(server, sqlite_db, owner.agent.org_id) == set()


def test_the_same_form_posted_again_issues_nothing_more(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    """A reload of the answer that showed the secret posts the same form, nonce and all."""
    owner.browser.sudo(PAGE)
    page = owner.browser.get(PAGE).text
    nonce = NONCE.search(page)
    assert nonce is not None
    form = {"csrf": csrf_of(page), "nonce": nonce.group(1), **ISSUE}
    first = owner.browser.http.post(PAGE, data=form)
    assert first.status_code == 200
    again = owner.browser.http.post(PAGE, data=form)
    assert again.status_code == 409
    assert "already issued and shown once" in text_of(again)
    assert SECRET.search(again.text) is None
    assert len(_token_ids(server, sqlite_db, owner.agent.org_id)) == 1
    stale = owner.browser.http.post(PAGE, data={**form, "nonce": "not-a-nonce"})
    assert stale.status_code == 400
    assert "this form is out of date" in text_of(stale)
    assert len(_token_ids(server, sqlite_db, owner.agent.org_id)) == 1
