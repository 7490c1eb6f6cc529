"""The operator's command line against a real database: in this process through typer's runner
where a test runs many commands, and as the installed `paywarden` in a real subprocess where the
entry point itself is the subject (its exit codes and the refusal to start)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import AccessToken, Wallet
from tests.support.cli import Run, paywarden, run_cli
from tests.support.databases import database_url

KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
ADDRESS = "0x2c7536E3605D9C16a7a3D7b1898e529396a65c23"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> object:
    with database_url(request.param, tmp_path) as value:
        yield value


def cli(tmp_path: Path, url: str, *args: str, env: dict[str, str] | None = None) -> Run:
    """A command in this process; a Run, so `.json()` still checks that --json prints one object."""
    result = run_cli(url, *args, env=env)
    return Run(result.exit_code, result.stdout, result.stderr)


def installed(tmp_path: Path, url: str, *args: str, env: dict[str, str] | None = None) -> Run:
    """The installed `paywarden` command in a real subprocess."""
    return paywarden(*args, cwd=tmp_path, database_url=url, env=env)


def test_an_operator_sets_up_an_agent_end_to_end(tmp_path: Path, url: str) -> None:
    migrated = cli(tmp_path, url, "migrate", "--json").json()
    assert migrated["to"] is not None
    org = cli(tmp_path, url, "admin", "org", "create", "acme", "--json").json()
    agent = cli(tmp_path, url, "admin", "agent", "create", "--org", "acme", "--name", "bot", "--json").json()
    assert agent["orgId"] == org["orgId"]
    assert agent["network"] == "eip155:84532"

    policy = cli(
        tmp_path,
        url,
        "admin",
        "policy",
        "set",
        agent["agentId"],
        "--allow-host",
        "api.example.com",
        "--allow-host",
        "*.data.example.com",
        "--max-per-tx",
        "0.05",
        "--daily-cap",
        "2",
        "--step-up",
        "0.5",
        "--json",
    ).json()
    assert policy["policyVersion"] == 2
    assert policy["policy"]["allowHosts"] == ["api.example.com", "*.data.example.com"]
    assert policy["policy"]["maxUsdPerTx"] == "0.05"
    assert policy["policy"]["dailyCapUsd"] == "2.00"
    assert policy["policy"]["stepUpThresholdUsd"] == "0.50"
    # Options left out keep their value; a new version is written each time.
    again = cli(
        tmp_path, url, "admin", "policy", "set", agent["agentId"], "--daily-cap", "3", "--json"
    ).json()
    assert again["policyVersion"] == 3
    assert again["policy"]["allowHosts"] == ["api.example.com", "*.data.example.com"]

    wallet = cli(
        tmp_path,
        url,
        "admin",
        "wallet",
        "import",
        agent["agentId"],
        "--from-env",
        "PAYWARDEN_IMPORT_KEY",
        "--json",
        env={"PAYWARDEN_IMPORT_KEY": KEY},
    ).json()
    assert wallet == {"agentId": agent["agentId"], "address": ADDRESS, "mode": "local_key"}
    assert KEY.removeprefix("0x") not in wallet.__repr__()

    token = cli(
        tmp_path,
        url,
        "admin",
        "token",
        "issue",
        "--agent",
        agent["agentId"],
        "--scopes",
        "payments:read",
        "--json",
    ).json()
    assert token["token"].startswith("pw_at_")
    assert token["scopes"] == ["payments:read"]
    revoked = cli(tmp_path, url, "admin", "token", "revoke", token["tokenId"], "--json").json()
    assert revoked["revokedAt"] is not None
    # An admin token reads unless asked for more (least privilege); write also reads.
    admin = cli(tmp_path, url, "admin", "token", "issue", "--admin", "--org", "acme", "--json").json()
    assert admin["scopes"] == ["admin:read"]
    writer = cli(
        tmp_path, url, "admin", "token", "issue", "--admin", "--org", "acme", "--access", "write", "--json"
    ).json()
    assert writer["scopes"] == ["admin:write"]
    wrong = cli(tmp_path, url, "admin", "token", "issue", "--admin", "--org", "acme", "--access", "all")
    assert wrong.code != 0
    assert "--access must be read or write" in wrong.stderr

    assert cli(tmp_path, url, "audit", "verify", "--json").json()["intact"] is True

    db = Database(url)
    try:
        with db.read() as session:
            stored = session.exec(select(Wallet)).one()
            assert stored.sealed_secret is not None
            assert bytes.fromhex(KEY[2:]) not in stored.sealed_secret
            hashes = [row.token_hash for row in session.exec(select(AccessToken))]
            assert token["token"] not in json.dumps(hashes)
    finally:
        db.dispose()


def test_errors_are_one_line_on_stderr_with_a_nonzero_exit(tmp_path: Path, url: str) -> None:
    cli(tmp_path, url, "migrate")
    missing = cli(tmp_path, url, "admin", "agent", "create", "--org", "nope", "--name", "bot", "--json")
    assert missing.code != 0
    assert missing.stdout == ""
    assert missing.stderr.strip().count("\n") == 0
    assert "org_not_found" in missing.stderr

    cli(tmp_path, url, "admin", "org", "create", "acme")
    agent = cli(tmp_path, url, "admin", "agent", "create", "--org", "acme", "--name", "bot", "--json").json()
    for args in (
        ("admin", "token", "issue", "--agent", agent["agentId"], "--scopes", "payments:read admin"),
        ("admin", "policy", "set", agent["agentId"], "--allow-host", "*"),
        ("admin", "policy", "set", agent["agentId"], "--network", "eip155:1"),
        ("admin", "policy", "set", agent["agentId"], "--daily-cap", "-1"),
        ("admin", "wallet", "import", agent["agentId"], "--from-env", "NOT_SET_ANYWHERE"),
    ):
        run = cli(tmp_path, url, *args)
        assert run.code != 0, args
        assert run.stderr.startswith("error: "), (args, run.stderr)
        assert run.stderr.strip().count("\n") == 0, (args, run.stderr)


def test_a_key_in_configuration_is_refused(tmp_path: Path, url: str) -> None:
    run = installed(tmp_path, url, "migrate", env={"PAYWARDEN_WALLET": KEY})
    assert run.code == 2
    assert "PAYWARDEN_WALLET looks like a private key" in run.stderr


def test_serve_refuses_a_schema_that_is_behind(tmp_path: Path, url: str) -> None:
    run = installed(tmp_path, url, "serve", "--port", "1")
    assert run.code == 1
    assert "run `paywarden migrate`" in run.stderr


def test_demo_is_idempotent_and_prints_a_working_token(tmp_path: Path, url: str) -> None:
    cli(tmp_path, url, "migrate")
    first = cli(tmp_path, url, "demo", "--json").json()
    second = cli(tmp_path, url, "demo", "--json").json()
    assert first["agentId"] == second["agentId"]
    assert first["orgId"] == second["orgId"]
    assert first["token"] == second["token"]  # the same token while it is valid
    human = cli(tmp_path, url, "demo")
    assert "claude mcp add --transport http paywarden" in human.stdout
    assert '"headers": {"Authorization": "Bearer pw_at_' in human.stdout
