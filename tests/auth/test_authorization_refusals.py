"""Every way an authorization request, a consent or a code exchange is refused, each with its exact
error: at the client's redirect (with state and iss) when the client and redirect are known, as a
page for the person otherwise, and as an RFC 6749 error document at the token endpoint."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlmodel import select

from auth.tokens import hash_secret
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AccessToken, AuditEvent
from server.vocabulary import Role
from tests.support.clocks import frozen_clock
from tests.support.oauth import (
    CALLBACK,
    Person,
    SoftBrowser,
    authorization_params,
    call_tool,
    code_of,
    connect,
    csrf_of,
    enrolled_person,
    exchange,
    pkce,
    query_of,
    register,
)
from tests.support.paywarden import RunningServer, serve

UNLIMITED = {
    "PAYWARDEN_RATE_LIMIT_SIGN_IN": "10000",
    "PAYWARDEN_RATE_LIMIT_REGISTER": "10000",
    "PAYWARDEN_RATE_LIMIT_AUTHORIZE": "10000",
    "PAYWARDEN_RATE_LIMIT_TOKEN": "100000",
}


# Every test enrols its own person in a new organisation and registers its own clients: they
# share one server, its clock and one SQLite database per module (docs/development.md,
# "Sharing a server"). The clock only moves forward, and each test reads it as it finds it.
@pytest.fixture(scope="module", name="clock")
def fixture_clock() -> FrozenClock:
    return frozen_clock()


@pytest.fixture(name="sqlite_db")
def fixture_sqlite_db(module_sqlite_db: Database) -> Database:
    return module_sqlite_db


@pytest.fixture(scope="module", name="server")
def fixture_server(module_sqlite_db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    # Rate limits count per address and minute, and the shared clock never starts a new minute by
    # itself; they are not what this module tests (other modules of tests/auth are about them).
    with serve(module_sqlite_db.url, public_host="localhost", clock=clock, extra=UNLIMITED) as running:
        yield running


def _error_redirect(response: httpx.Response, server: RunningServer) -> dict[str, str]:
    assert response.status_code == 302, response.text[:400]
    location = response.headers["location"]
    assert location.startswith(CALLBACK + "?")
    found = {name: values[0] for name, values in query_of(location).items()}
    assert found["iss"] == server.settings.public_url
    assert "code" not in found
    return found


def test_an_unregistered_redirect_uri_is_refused_on_a_page(server: RunningServer, owner: Person) -> None:
    client = register(server, redirect_uris=["https://app.example.com/callback"])
    for wrong in (
        "https://app.example.com/callback/extra",
        "https://app.example.com/callback?x=1",
        "https://evil.example/callback",
        "https://app.example.com/callback#fragment",
    ):
        page = owner.browser.authorize(authorization_params(client["client_id"], pkce(), redirect_uri=wrong))
        assert page.status_code == 400
        assert "asked Paywarden to send you back to an address it never registered" in page.text
        assert "location" not in page.headers


def test_a_second_redirect_uri_in_one_request_is_refused(server: RunningServer, owner: Person) -> None:
    client = register(server)
    params = [*authorization_params(client["client_id"], pkce()), ("redirect_uri", "http://127.0.0.1:9/cb")]
    page = owner.browser.authorize(params)
    assert page.status_code == 400
    assert "request to connect is incomplete or malformed" in page.text


def test_a_loopback_redirect_matches_on_any_port(server: RunningServer, owner: Person) -> None:
    client = register(server, redirect_uris=["http://127.0.0.1/callback", "http://localhost:3000/callback"])
    for redirect in ("http://127.0.0.1:61234/callback", "http://localhost:45678/callback"):
        challenge = pkce()
        page = owner.browser.authorize(
            authorization_params(client["client_id"], challenge, redirect_uri=redirect)
        )
        assert page.status_code == 200, page.text[:300]
        code = code_of(owner.browser.consent(page))
        answer = exchange(server, client["client_id"], code, challenge.verifier, redirect_uri=redirect)
        assert answer.status_code == 200, answer.text
    # Another host or path is not the registered redirect, whatever the port.
    for wrong in ("http://localhost:61234/other", "http://127.0.0.2:61234/callback"):
        page = owner.browser.authorize(authorization_params(client["client_id"], pkce(), redirect_uri=wrong))
        assert page.status_code == 400


def test_a_non_loopback_redirect_on_another_port_is_refused(server: RunningServer, owner: Person) -> None:
    client = register(server, redirect_uris=["https://app.example.com:8443/callback"])
    page = owner.browser.authorize(
        authorization_params(
            client["client_id"], pkce(), redirect_uri="https://app.example.com:9443/callback"
        )
    )
    assert page.status_code == 400
    assert "an address it never registered" in page.text


def test_plain_pkce_is_refused_at_the_redirect_with_state_and_iss(
    server: RunningServer, owner: Person
) -> None:
    client = register(server)
    challenge = pkce()
    plain = owner.browser.authorize(authorization_params(client["client_id"], challenge, method="plain"))
    found = _error_redirect(plain, server)
    assert found == {
        "error": "invalid_request",
        "error_description": "Only code_challenge_method=S256 is supported.",
        "state": "state-1",
        "iss": server.settings.public_url,
    }
    # A challenge without a method means plain (RFC 7636), so it is refused the same way.
    implicit = owner.browser.authorize(authorization_params(client["client_id"], challenge, method=None))
    assert (
        _error_redirect(implicit, server)["error_description"]
        == "Only code_challenge_method=S256 is supported."
    )


def test_missing_pkce_is_refused(server: RunningServer, owner: Person) -> None:
    client = register(server, token_endpoint_auth_method="client_secret_basic")
    params = [
        (k, v) for k, v in authorization_params(client["client_id"], pkce()) if not k.startswith("code_")
    ]
    found = _error_redirect(owner.browser.authorize(params), server)
    assert (found["error"], found["error_description"]) == (
        "invalid_request",
        "PKCE is required: send code_challenge with code_challenge_method=S256.",
    )


def test_a_wrong_code_verifier_is_refused(server: RunningServer, owner: Person) -> None:
    client = register(server)
    challenge = pkce()
    code = code_of(
        owner.browser.consent(owner.browser.authorize(authorization_params(client["client_id"], challenge)))
    )
    answer = exchange(server, client["client_id"], code, pkce().verifier)
    assert answer.json() == {"error": "invalid_grant", "error_description": "Code challenge failed."}
    missing = httpx.post(
        f"{server.public_url}/oauth/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client["client_id"],
        },
    )
    assert missing.json()["error"] in ("invalid_request", "invalid_grant")


def test_a_code_is_used_once_and_its_reuse_revokes_what_it_gave(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    client = register(server)
    challenge = pkce()
    code = code_of(
        owner.browser.consent(owner.browser.authorize(authorization_params(client["client_id"], challenge)))
    )
    first = exchange(server, client["client_id"], code, challenge.verifier)
    assert first.status_code == 200
    again = exchange(server, client["client_id"], code, challenge.verifier)
    assert again.status_code == 400
    assert again.json() == {
        "error": "invalid_grant",
        "error_description": "The authorization code was already used.",
    }
    revoked = call_tool(server.settings.mcp_url, first.json()["access_token"], "get_budget")
    assert revoked.status_code == 401
    with sqlite_db.read() as session:
        types = [
            event.type
            for event in session.exec(select(AuditEvent).where(AuditEvent.org_id == owner.agent.org_id)).all()
        ]
    assert "oauth.code_reused" in types


def test_a_code_from_another_client_is_refused(server: RunningServer, owner: Person) -> None:
    mine, theirs = register(server), register(server)
    challenge = pkce()
    code = code_of(
        owner.browser.consent(owner.browser.authorize(authorization_params(mine["client_id"], challenge)))
    )
    stolen = exchange(server, theirs["client_id"], code, challenge.verifier)
    assert stolen.json() == {
        "error": "invalid_grant",
        "error_description": "The authorization code was issued to another client.",
    }
    # The rightful client can still use it: a thief's attempt does not burn it.
    assert exchange(server, mine["client_id"], code, challenge.verifier).status_code == 200


def test_an_expired_code_is_refused(server: RunningServer, owner: Person, clock: FrozenClock) -> None:
    client = register(server)
    challenge = pkce()
    code = code_of(
        owner.browser.consent(owner.browser.authorize(authorization_params(client["client_id"], challenge)))
    )
    clock.advance(61)
    answer = exchange(server, client["client_id"], code, challenge.verifier)
    assert answer.json() == {"error": "invalid_grant", "error_description": "The authorization code expired."}


def test_a_code_must_come_back_with_its_own_redirect_uri(server: RunningServer, owner: Person) -> None:
    client = register(server)
    challenge = pkce()
    code = code_of(
        owner.browser.consent(owner.browser.authorize(authorization_params(client["client_id"], challenge)))
    )
    answer = exchange(
        server, client["client_id"], code, challenge.verifier, redirect_uri="http://127.0.0.1:1/callback"
    )
    assert answer.json()["error"] == "invalid_grant"


def test_another_resource_is_an_invalid_target(server: RunningServer, owner: Person) -> None:
    client = register(server)
    found = _error_redirect(
        owner.browser.authorize(
            authorization_params(client["client_id"], pkce(), resource="https://other.example/mcp")
        ),
        server,
    )
    assert found["error"] == "invalid_target"
    assert found["state"] == "state-1"


def test_a_token_for_another_audience_is_refused_at_mcp(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    _, tokens = connect(server, owner)
    with sqlite_db.write() as session:
        row = session.exec(
            select(AccessToken).where(AccessToken.token_hash == hash_secret(tokens["access_token"]))
        ).one()
        row.audience = "https://other.example/mcp"
        session.add(row)
    answer = call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget")
    assert answer.status_code == 401
    assert (
        'error_description="The access token was issued for another resource."'
        in answer.headers["www-authenticate"]
    )


def test_a_revoked_access_token_is_refused(server: RunningServer, owner: Person) -> None:
    client, tokens = connect(server, owner)
    revoked = httpx.post(
        f"{server.public_url}/oauth/revoke",
        data={"token": tokens["access_token"], "client_id": client["client_id"]},
    )
    assert revoked.status_code == 200
    answer = call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget")
    assert answer.status_code == 401
    assert 'error="invalid_token"' in answer.headers["www-authenticate"]
    assert "The access token was revoked." in answer.headers["www-authenticate"]


def test_the_admin_scope_is_never_requested(server: RunningServer, owner: Person) -> None:
    client = register(server)
    found = _error_redirect(
        owner.browser.authorize(
            authorization_params(client["client_id"], pkce(), scope="payments:read admin")
        ),
        server,
    )
    assert found["error"] == "invalid_scope"


def test_a_scope_the_member_may_not_grant_is_refused(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    viewer = enrolled_person(server, sqlite_db, role=Role.VIEWER, org_id=owner.agent.org_id)
    client = register(server)
    page = viewer.browser.authorize(authorization_params(client["client_id"], pkce()))
    # A viewer has no agent of their own, so nothing is offered; an owner's agent is not theirs.
    assert "You may not connect any agent to an application." in page.text
    refused = viewer.browser.consent(page, agent=owner.agent.agent_id, scopes=["payments:read"])
    assert refused.status_code == 403
    assert "You cannot give an application access to that agent." in refused.text


def test_a_viewer_grants_read_scopes_only_for_their_own_agent(
    server: RunningServer, sqlite_db: Database
) -> None:
    viewer = enrolled_person(server, sqlite_db, role=Role.VIEWER, own_agent=True)
    client = register(server)
    page = viewer.browser.authorize(authorization_params(client["client_id"], pkce()))
    assert 'value="payments:write"' not in page.text
    assert "Your role cannot give:" in page.text
    refused = viewer.browser.consent(page, scopes=["payments:read", "payments:write"])
    assert refused.status_code == 403
    assert "You cannot give an application one of the permissions that was chosen." in refused.text
    allowed = viewer.browser.consent(page, scopes=["payments:read"])
    assert allowed.status_code == 303


def test_an_agent_of_another_organisation_is_refused(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    stranger = enrolled_person(server, sqlite_db)
    client = register(server)
    page = owner.browser.authorize(authorization_params(client["client_id"], pkce()))
    assert stranger.agent.agent_id not in page.text
    refused = owner.browser.consent(page, agent=stranger.agent.agent_id)
    assert refused.status_code == 403
    assert "You cannot give an application access to that agent." in refused.text
    stranger.browser.close()


@pytest.mark.parametrize("token", [None, "", "0" * 64])
def test_a_consent_without_its_csrf_token_is_refused(
    server: RunningServer, owner: Person, token: str | None
) -> None:
    client = register(server)
    page = owner.browser.authorize(authorization_params(client["client_id"], pkce()))
    refused = owner.browser.consent(page, csrf=token, omit_csrf=token is None)
    assert refused.status_code == 403
    assert "This form has expired or did not come from a Paywarden page." in refused.text
    assert "location" not in refused.headers


def test_another_browsers_csrf_token_is_refused(server: RunningServer, owner: Person) -> None:
    client = register(server)
    page = owner.browser.authorize(authorization_params(client["client_id"], pkce()))
    with SoftBrowser(server) as other:
        foreign = csrf_of(other.get("/login").text)
    refused = owner.browser.consent(page, csrf=foreign)
    assert refused.status_code == 403


def test_denying_answers_access_denied_with_state_and_iss(server: RunningServer, owner: Person) -> None:
    client = register(server)
    page = owner.browser.authorize(authorization_params(client["client_id"], pkce(), state="deny-me"))
    denied = owner.browser.consent(page, decision="deny")
    assert denied.status_code == 303
    found = {name: values[0] for name, values in query_of(denied.headers["location"]).items()}
    assert found["error"] == "access_denied"
    assert (found["state"], found["iss"]) == ("deny-me", server.settings.public_url)


def test_an_unknown_client_is_refused_on_a_page(server: RunningServer, owner: Person) -> None:
    page = owner.browser.authorize(authorization_params("pwc_nobody", pkce()))
    assert page.status_code == 400
    assert "Paywarden does not know the application that sent you here." in page.text


def test_choosing_no_scope_asks_again(server: RunningServer, owner: Person) -> None:
    client = register(server)
    page = owner.browser.authorize(authorization_params(client["client_id"], pkce()))
    again = owner.browser.consent(page, scopes=[])
    assert again.status_code == 400
    assert "Choose at least one permission to give the application, or choose Deny." in again.text
    assert 'name="query"' in again.text
