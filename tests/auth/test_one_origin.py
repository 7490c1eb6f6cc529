"""One origin: every URL Paywarden prints or returns is under its public URL, which on this machine
is `http://localhost:PORT` (a passkey needs a name, not an address). A client that reaches /mcp by
the other loopback name (127.0.0.1) gets discovery documents that name /mcp as it knows it, and
signs in through the same pages; the token it gets works under both names."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from server.cli.main import public_name
from server.kit.db import Database
from server.settings import load_settings
from tests.support.chain import free_port
from tests.support.cli import run_cli
from tests.support.oauth import (
    Person,
    authorization_params,
    call_tool,
    code_of,
    exchange,
    pkce,
    register,
    rpc_result,
)
from tests.support.paywarden import TEST_MASTER_KEY, RunningServer
from tests.support.processes import ServeProcess, server_environ

METADATA = "/.well-known/oauth-protected-resource/mcp"


def test_the_default_public_url_is_localhost() -> None:
    settings = load_settings(environ={"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY})
    assert settings.public_url == "http://localhost:8402"
    assert settings.mcp_url == "http://localhost:8402/mcp"
    assert settings.pages_url == settings.public_url


@pytest.mark.parametrize("given", ["http://127.0.0.1:9000", "http://[::1]:9000/", "http://localhost:9000"])
def test_a_loopback_address_is_kept_under_its_name(given: str) -> None:
    settings = load_settings(environ={"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY, "PAYWARDEN_PUBLIC_URL": given})
    assert settings.public_url == "http://localhost:9000"
    assert settings.rp_id == "localhost"
    assert settings.resource_aliases() == {"http://127.0.0.1:9000/mcp", "http://[::1]:9000/mcp"}


def test_a_named_public_url_has_no_aliases() -> None:
    settings = load_settings(
        environ={"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY, "PAYWARDEN_PUBLIC_URL": "https://pw.example.com"}
    )
    assert settings.resource_aliases() == frozenset()
    assert settings.loopback_alias("127.0.0.1:443") is None


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1", "localhost"),
        ("::1", "localhost"),
        ("0.0.0.0", "localhost"),
        ("pw.internal", "pw.internal"),
    ],
)
def test_the_bound_host_names_the_public_url(host: str, name: str) -> None:
    assert public_name(host) == name


def test_the_demo_prints_every_url_under_the_public_url(server: RunningServer, sqlite_db: Database) -> None:
    origin = f"http://localhost:{server.port}"
    demo = run_cli(sqlite_db.url, "demo", "--json", public_url=f"http://127.0.0.1:{server.port}").json()
    assert demo["mcpUrl"] == f"{origin}/mcp"
    assert demo["adminUrl"] == f"{origin}/admin"
    assert demo["enrollUrl"].startswith(f"{origin}/enroll/pw_en_")


@pytest.mark.parametrize("spelling", ["localhost", "127.0.0.1"])
def test_discovery_answers_under_the_name_it_was_asked_by(server: RunningServer, spelling: str) -> None:
    asked = f"http://{spelling}:{server.port}"
    challenge = httpx.post(f"{asked}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
    assert challenge.status_code == 401
    assert f'resource_metadata="{asked}{METADATA}"' in challenge.headers["www-authenticate"]
    document = httpx.get(f"{asked}{METADATA}", timeout=10).json()
    assert document["resource"] == f"{asked}/mcp"
    # Signing in happens at the one origin, whichever name the client was given.
    assert document["authorization_servers"] == [f"http://localhost:{server.port}"]
    issuer = httpx.get(f"{asked}/.well-known/oauth-authorization-server", timeout=10).json()["issuer"]
    assert issuer == f"http://localhost:{server.port}"


def test_a_client_given_the_other_loopback_name_signs_in_and_calls(
    server: RunningServer, owner: Person
) -> None:
    alias = f"http://127.0.0.1:{server.port}/mcp"
    client = register(server, client_name="Alias client")
    challenge = pkce()
    page = owner.browser.authorize(authorization_params(client["client_id"], challenge, resource=alias))
    assert page.status_code == 200, page.text[:500]
    code = code_of(owner.browser.consent(page))
    answer = exchange(server, client["client_id"], code, challenge.verifier, resource=alias)
    assert answer.status_code == 200, answer.text
    token = answer.json()["access_token"]
    for url in (alias, server.settings.mcp_url):
        budget = rpc_result(call_tool(url, token, "get_budget"))
        assert budget["result"]["isError"] is False, budget


def test_another_resource_is_still_refused(server: RunningServer, owner: Person) -> None:
    client = register(server, client_name="Other resource")
    challenge = pkce()
    other = f"http://127.0.0.1:{server.port + 1}/mcp"
    answer = owner.browser.authorize(authorization_params(client["client_id"], challenge, resource=other))
    assert "invalid_target" in (answer.headers.get("location", "") + answer.text)


def test_serve_without_a_public_url_uses_its_port(sqlite_db: Database, tmp_path: Path) -> None:
    port = free_port()
    environ = server_environ(database_url=sqlite_db.url, public_url="", extra={})
    del environ["PAYWARDEN_PUBLIC_URL"]
    process = ServeProcess(port=port, environ=environ, workdir=tmp_path)
    process.start()
    try:
        deadline = time.monotonic() + 60
        while not process.ready():
            assert time.monotonic() < deadline, process.output()
            time.sleep(0.2)
        assert f"Paywarden serving http://localhost:{port}/mcp" in process.output()
        document = httpx.get(f"http://localhost:{port}{METADATA}", timeout=10).json()
        assert document["resource"] == f"http://localhost:{port}/mcp"
    finally:
        process.stop()
