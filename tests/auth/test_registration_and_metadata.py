"""Discovery documents (RFC 9728, RFC 8414) with CORS, dynamic client registration (RFC 7591) with
its refusals and rate limit, and the purge of registrations that never led to a grant."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest

from auth.clients import find_client
from auth.housekeeping import IdentityHousekeeping
from server.kit.clock import FrozenClock
from server.kit.db import Database
from tests.support.oauth import Person, connect, register
from tests.support.paywarden import RunningServer, serve


def test_the_authorization_server_metadata_is_ours_and_complete(server: RunningServer) -> None:
    response = httpx.get(f"{server.public_url}/.well-known/oauth-authorization-server")
    assert response.headers["access-control-allow-origin"] == "*"
    issuer = server.settings.public_url
    assert response.json() == {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "registration_endpoint": f"{issuer}/oauth/register",
        "revocation_endpoint": f"{issuer}/oauth/revoke",
        "introspection_endpoint": f"{issuer}/oauth/introspect",
        "scopes_supported": [
            "catalog:read",
            "payments:read",
            "payments:write",
            "policy:request",
            "rules:propose",
        ],
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
        "introspection_endpoint_auth_methods_supported": [
            "none",
            "client_secret_basic",
            "client_secret_post",
        ],
        "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]
)
def test_the_protected_resource_metadata_is_served_with_cors(server: RunningServer, path: str) -> None:
    response = httpx.get(server.public_url + path, headers={"Origin": "https://inspector.example"})
    assert response.headers["access-control-allow-origin"] == "*"
    document = response.json()
    assert document["resource"] == server.settings.mcp_url
    assert document["authorization_servers"] == [server.settings.public_url]
    assert document["bearer_methods_supported"] == ["header"]
    assert "offline_access" not in document["scopes_supported"]
    preflight = httpx.options(
        server.public_url + path,
        headers={"Origin": "https://inspector.example", "Access-Control-Request-Method": "GET"},
    )
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"


def test_a_public_client_registers(server: RunningServer) -> None:
    document = register(
        server,
        client_name="My \x07Client",
        redirect_uris=["http://127.0.0.1/callback", "cursor://anysphere.cursor-mcp/oauth/callback"],
        application_type="native",
        scope="payments:read offline_access",
    )
    assert document["client_id"].startswith("pwc_")
    assert "client_secret" not in document
    assert document["client_name"] == "My Client"
    assert document["token_endpoint_auth_method"] == "none"
    assert document["application_type"] == "native"
    assert document["grant_types"] == ["authorization_code", "refresh_token"]
    assert document["scope"] == "offline_access payments:read"


def test_a_registration_without_an_auth_method_is_confidential(server: RunningServer) -> None:
    response = httpx.post(
        f"{server.public_url}/oauth/register", json={"redirect_uris": ["https://app.example.com/cb"]}
    )
    assert response.status_code == 201
    document = response.json()
    assert document["token_endpoint_auth_method"] == "client_secret_basic"
    assert document["client_secret"].startswith("pw_cs_")
    assert document["client_secret_expires_at"] == 0
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": ["http://app.example.com/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://app.example.com/cb#x"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://*.example.com/cb"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"scope": "payments:read admin"}, "invalid_client_metadata"),
        ({"token_endpoint_auth_method": "private_key_jwt"}, "invalid_client_metadata"),
        ({"application_type": "service"}, "invalid_client_metadata"),
    ],
)
def test_unacceptable_registrations_are_refused(
    server: RunningServer, metadata: dict[str, object], error: str
) -> None:
    body = {"redirect_uris": ["http://127.0.0.1/cb"], **metadata}
    response = httpx.post(f"{server.public_url}/oauth/register", json=body)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert response.json()["error_description"]


def test_a_registration_that_is_not_json_is_refused(server: RunningServer) -> None:
    response = httpx.post(f"{server.public_url}/oauth/register", content=b"redirect_uris=x")
    assert response.json() == {
        "error": "invalid_client_metadata",
        "error_description": "The registration must be a JSON object.",
    }


def test_registration_is_rate_limited_with_a_clear_429(sqlite_db: Database) -> None:
    with serve(
        sqlite_db.url, public_host="localhost", extra={"PAYWARDEN_RATE_LIMIT_REGISTER": "3"}
    ) as limited:
        codes = [
            httpx.post(
                f"{limited.public_url}/oauth/register", json={"redirect_uris": ["http://127.0.0.1/cb"]}
            )
            for _ in range(4)
        ]
    assert [response.status_code for response in codes] == [201, 201, 201, 429]
    refused = codes[-1]
    assert refused.json() == {
        "error": "rate_limited",
        "error_description": "Too many requests came from here in a short time. Wait a minute and try again.",
    }
    assert 1 <= int(refused.headers["retry-after"]) <= 3600


def test_registrations_that_never_led_to_a_grant_are_purged(
    server: RunningServer, owner: Person, sqlite_db: Database, clock: FrozenClock
) -> None:
    unused = register(server, client_name="Never used")
    used, _ = connect(server, owner, client=register(server, client_name="Used"))
    job = IdentityHousekeeping(db=sqlite_db, clock=clock)
    job.purge()  # nothing is a day old yet
    with sqlite_db.read() as session:
        assert find_client(session, unused["client_id"]) is not None
    clock.advance(timedelta(days=1, seconds=1).total_seconds())
    job.purge()
    with sqlite_db.read() as session:
        assert find_client(session, unused["client_id"]) is None
        assert find_client(session, used["client_id"]) is not None
