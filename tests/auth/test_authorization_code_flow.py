"""The authorization code flow end to end without a browser: a person enrols a software passkey
through the real pages, a client registers, the person consents, the client exchanges the code and
calls a tool with the token, refreshes, introspects and revokes."""

from __future__ import annotations

import httpx
import pytest

from server.kit.db import Database
from tests.support.oauth import (
    CALLBACK,
    Person,
    authorization_params,
    call_tool,
    code_of,
    connect,
    exchange,
    pkce,
    query_of,
    refresh_with,
    register,
    rpc_result,
)
from tests.support.paywarden import RunningServer


def test_a_client_connects_by_consent_and_calls_a_tool(server: RunningServer, owner: Person) -> None:
    _client, tokens = connect(server, owner)
    assert tokens["token_type"] == "Bearer"
    assert tokens["access_token"].startswith("pw_at_")
    assert tokens["refresh_token"].startswith("pw_rt_")
    assert tokens["expires_in"] == server.settings.access_token_ttl
    assert tokens["scope"].split() == [
        "catalog:read",
        "payments:read",
        "payments:write",
        "policy:request",
        "rules:propose",
    ]
    result = rpc_result(call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget"))
    assert result["result"]["structuredContent"]["agentId"] == owner.agent.agent_id
    assert not result["result"].get("isError")


def test_the_token_response_is_never_cached_and_names_the_issuer_in_the_redirect(
    server: RunningServer, owner: Person
) -> None:
    client = register(server, client_name="Cache check")
    challenge = pkce()
    page = owner.browser.authorize(authorization_params(client["client_id"], challenge, state="s-42"))
    redirect = owner.browser.consent(page)
    found = query_of(redirect.headers["location"])
    assert redirect.headers["location"].startswith(CALLBACK + "?")
    assert found["state"] == ["s-42"]
    assert found["iss"] == [server.settings.public_url]
    answer = exchange(server, client["client_id"], found["code"][0], challenge.verifier)
    assert answer.status_code == 200
    assert answer.headers["cache-control"] == "no-store"
    assert answer.headers["content-type"].startswith("application/json")


def test_a_client_that_names_no_resource_gets_the_mcp_endpoint_as_audience(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    _, tokens = connect(server, owner)
    introspected = httpx.post(
        f"{server.public_url}/oauth/introspect",
        data={"token": tokens["access_token"], "client_id": _client_of(sqlite_db, tokens["access_token"])},
    ).json()
    assert introspected["active"] is True
    assert introspected["aud"] == server.settings.mcp_url
    assert introspected["sub"] == owner.agent.agent_id
    assert introspected["iss"] == server.settings.public_url


def test_the_resource_is_bound_into_the_code_and_checked_at_the_token_endpoint(
    server: RunningServer, owner: Person
) -> None:
    client = register(server)
    challenge = pkce()
    page = owner.browser.authorize(
        authorization_params(client["client_id"], challenge, resource=server.settings.mcp_url)
    )
    code = code_of(owner.browser.consent(page))
    wrong = exchange(
        server, client["client_id"], code, challenge.verifier, resource="https://other.example/mcp"
    )
    assert wrong.status_code == 400
    assert wrong.json()["error"] == "invalid_target"


def test_refresh_rotates_and_the_new_pair_works(server: RunningServer, owner: Person) -> None:
    client, tokens = connect(server, owner)
    renewed = refresh_with(server, client["client_id"], tokens["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    pair = renewed.json()
    assert pair["refresh_token"] != tokens["refresh_token"]
    assert pair["access_token"] != tokens["access_token"]
    assert renewed.headers["cache-control"] == "no-store"
    assert rpc_result(call_tool(server.settings.mcp_url, pair["access_token"], "get_budget"))["result"]
    narrowed = refresh_with(server, client["client_id"], pair["refresh_token"], scope="payments:read")
    assert narrowed.status_code == 200
    assert narrowed.json()["scope"] == "payments:read"
    wider = refresh_with(
        server, client["client_id"], narrowed.json()["refresh_token"], scope="payments:write admin"
    )
    assert wider.status_code == 400
    assert wider.json()["error"] == "invalid_grant"


def test_revoking_a_refresh_token_revokes_its_family(server: RunningServer, owner: Person) -> None:
    client, tokens = connect(server, owner)
    revoked = httpx.post(
        f"{server.public_url}/oauth/revoke",
        data={
            "token": tokens["refresh_token"],
            "client_id": client["client_id"],
            "token_type_hint": "refresh_token",
        },
    )
    assert revoked.status_code == 200
    denied = call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget")
    assert denied.status_code == 401
    assert "The access token was revoked." in denied.headers["www-authenticate"]
    again = refresh_with(server, client["client_id"], tokens["refresh_token"])
    assert again.json() == {"error": "invalid_grant", "error_description": "The refresh token was revoked."}


def test_introspection_answers_only_for_the_clients_own_tokens(server: RunningServer, owner: Person) -> None:
    client, tokens = connect(server, owner)
    other = register(server, client_name="Another")
    own = httpx.post(
        f"{server.public_url}/oauth/introspect",
        data={"token": tokens["access_token"], "client_id": client["client_id"]},
    ).json()
    assert own["active"] is True
    assert own["scope"] == tokens["scope"]
    assert own["client_id"] == client["client_id"]
    foreign = httpx.post(
        f"{server.public_url}/oauth/introspect",
        data={"token": tokens["access_token"], "client_id": other["client_id"]},
    ).json()
    assert foreign == {"active": False}


@pytest.mark.parametrize("secret_in", ["basic", "post"])
def test_a_confidential_client_authenticates_at_the_token_endpoint(
    server: RunningServer, owner: Person, secret_in: str
) -> None:
    method = "client_secret_basic" if secret_in == "basic" else "client_secret_post"
    client = register(server, token_endpoint_auth_method=method)
    assert client["client_secret"].startswith("pw_cs_")
    challenge = pkce()
    page = owner.browser.authorize(authorization_params(client["client_id"], challenge))
    code = code_of(owner.browser.consent(page))
    anonymous = exchange(server, client["client_id"], code, challenge.verifier)
    assert anonymous.status_code in (400, 401)
    assert anonymous.json()["error"] == "invalid_client"
    page = owner.browser.authorize(authorization_params(client["client_id"], challenge))
    code = code_of(owner.browser.consent(page))
    if secret_in == "basic":
        answer = exchange(
            server, client["client_id"], code, challenge.verifier, secret=client["client_secret"]
        )
    else:
        answer = httpx.post(
            f"{server.public_url}/oauth/token",
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": CALLBACK,
                "client_id": client["client_id"],
                "client_secret": client["client_secret"],
                "code_verifier": challenge.verifier,
            },
        )
    assert answer.status_code == 200, answer.text


def _client_of(db: Database, access_token: str) -> str:
    from auth.tokens import find_by_secret
    from server.models import OAuthClient

    with db.read() as session:
        row = find_by_secret(session, access_token)
        assert row is not None
        assert row.client_id is not None
        client = session.get(OAuthClient, row.client_id)
        assert client is not None
        return client.client_id


def test_offline_access_is_understood_and_never_a_permission(server: RunningServer, owner: Person) -> None:
    client = register(server)
    challenge = pkce()
    page = owner.browser.authorize(
        authorization_params(client["client_id"], challenge, scope="payments:read offline_access")
    )
    assert page.status_code == 200
    assert 'value="offline_access"' not in page.text  # not a permission on the page
    code = code_of(owner.browser.consent(page))
    tokens = exchange(server, client["client_id"], code, challenge.verifier).json()
    assert tokens["scope"] == "payments:read"
    assert tokens["refresh_token"].startswith("pw_rt_")


def test_a_registered_scope_is_the_default_not_a_ceiling(server: RunningServer, owner: Person) -> None:
    client = register(server, scope="payments:read")
    default = owner.browser.authorize(authorization_params(client["client_id"], pkce()))
    assert 'value="payments:read"' in default.text
    assert 'value="payments:write"' not in default.text
    wider = owner.browser.authorize(authorization_params(client["client_id"], pkce(), scope="payments:write"))
    assert wider.status_code == 200
    assert 'value="payments:write"' in wider.text
