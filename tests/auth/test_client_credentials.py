"""Clients an operator creates (`paywarden admin client create`) for client_credentials: bound to
one agent and a set of scopes, listed with the organisation's connections, revocable."""

from __future__ import annotations

import httpx
import pytest

from server.kit.db import Database
from tests.support.cli import run_cli
from tests.support.oauth import Person, call_tool, register, rpc_result
from tests.support.paywarden import RunningServer


def _client(
    server: RunningServer, db: Database, agent_id: str, scopes: str = "payments:read"
) -> dict[str, str]:
    return run_cli(
        db.url,
        "admin",
        "client",
        "create",
        "--agent",
        agent_id,
        "--name",
        "Nightly job",
        "--scopes",
        scopes,
        "--json",
        public_url=server.settings.public_url,
    ).json()


def _token(server: RunningServer, client: dict[str, str], **form: str) -> httpx.Response:
    return httpx.post(
        f"{server.public_url}/oauth/token",
        data={"grant_type": "client_credentials", **form},
        auth=(client["clientId"], client["clientSecret"]),
    )


def test_a_client_credentials_token_acts_for_its_one_agent(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    client = _client(server, sqlite_db, owner.agent.agent_id, "payments:read rules:propose")
    assert client["clientId"].startswith("pwc_")
    assert client["clientSecret"].startswith("pw_cs_")
    assert client["tokenUrl"] == f"{server.settings.public_url}/oauth/token"
    answer = _token(server, client)
    assert answer.status_code == 200, answer.text
    tokens = answer.json()
    assert "refresh_token" not in tokens
    assert tokens["scope"] == "payments:read rules:propose"
    assert answer.headers["cache-control"] == "no-store"
    result = rpc_result(call_tool(server.settings.mcp_url, tokens["access_token"], "get_budget"))
    assert result["result"]["structuredContent"]["agentId"] == owner.agent.agent_id
    narrower = _token(server, client, scope="payments:read", resource=server.settings.mcp_url)
    assert narrower.json()["scope"] == "payments:read"


@pytest.mark.parametrize(
    ("form", "error"),
    [
        ({"scope": "payments:write"}, "invalid_scope"),
        ({"scope": "admin"}, "invalid_scope"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
    ],
)
def test_a_client_credentials_client_gets_no_more_than_it_was_given(
    server: RunningServer, owner: Person, sqlite_db: Database, form: dict[str, str], error: str
) -> None:
    client = _client(server, sqlite_db, owner.agent.agent_id)
    assert _token(server, client, **form).json()["error"] == error


def test_client_credentials_needs_the_secret_and_an_operator_made_client(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    client = _client(server, sqlite_db, owner.agent.agent_id)
    wrong = httpx.post(
        f"{server.public_url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=(client["clientId"], "pw_cs_wrong"),
    )
    assert wrong.status_code == 401
    assert wrong.json()["error"] == "invalid_client"
    registered = register(server, token_endpoint_auth_method="client_secret_basic")
    refused = httpx.post(
        f"{server.public_url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=(registered["client_id"], registered["client_secret"]),
    )
    assert refused.json()["error"] == "unauthorized_client"


def test_revoking_an_operator_made_client(server: RunningServer, owner: Person, sqlite_db: Database) -> None:
    client = _client(server, sqlite_db, owner.agent.agent_id)
    token = _token(server, client).json()["access_token"]
    page = owner.browser.get("/connections")
    assert "Nightly job" in page.text
    assert "created by an operator (client credentials)" in page.text
    revoked = run_cli(sqlite_db.url, "admin", "client", "revoke", client["clientId"], "--json").json()
    assert revoked["clientId"] == client["clientId"]
    assert revoked["revokedAt"]
    assert call_tool(server.settings.mcp_url, token, "get_budget").status_code == 401
    assert _token(server, client).status_code == 401
    assert "Nightly job" not in owner.browser.get("/connections").text


def test_admin_client_create_refuses_bad_input(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    for scopes in ("admin", "payments:read nonsense", ""):
        run = run_cli(
            sqlite_db.url,
            "admin",
            "client",
            "create",
            "--agent",
            owner.agent.agent_id,
            "--name",
            "x",
            "--scopes",
            scopes,
        )
        assert run.exit_code != 0
        assert run.stderr.count("\n") == 1
    missing = run_cli(
        sqlite_db.url,
        "admin",
        "client",
        "create",
        "--agent",
        "agt_nope",
        "--name",
        "x",
        "--scopes",
        "payments:read",
    )
    assert "agent_not_found" in missing.stderr
