"""The command line answers like a person: `--help` at once, and every mistake in one line.

`--help` is timed in CPU seconds of the child process (os.wait4), not wall time: the number stays
the same whatever else the machine is doing.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer

from auth.tokens import hash_secret
from server.cli import app
from server.cli.admin import catalog, token
from server.kit.db import Database
from server.models import AccessToken
from tests.support.cli import PAYWARDEN, command_environ, paywarden, run_cli
from tests.support.paywarden import TEST_MASTER_KEY

HELP_CPU_SECONDS = 0.5
# What `--help` must never load: the settings, the database layer, the wallet's cryptography.
HEAVY_MODULES = (
    "sqlalchemy",
    "sqlmodel",
    "eth_account",
    "pydantic_settings",
    "server.settings",
    "server.models",
)


def _command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if hasattr(command, "commands"):  # a group (typer carries its own copy of click)
        for name, sub in sorted(command.commands.items()):
            found.extend(_command_paths(sub, (*path, name)))
    return found


COMMANDS = _command_paths(typer.main.get_command(app))


def _cpu_seconds_of(args: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout is not None
    output = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, process.returncode, output


def test_every_command_is_in_the_table() -> None:
    assert ("admin", "agent", "list") in COMMANDS
    assert ("migrate",) in COMMANDS
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("path", COMMANDS, ids=lambda path: " ".join(path) or "paywarden")
def test_help_takes_under_half_a_second_of_cpu(path: tuple[str, ...], tmp_path: Path) -> None:
    env = command_environ(database_url=f"sqlite:///{tmp_path / 'absent.db'}")
    seconds, code, output = _cpu_seconds_of([PAYWARDEN, *path, "--help"], env)
    assert code == 0, output
    assert "Usage:" in output
    assert seconds < HELP_CPU_SECONDS, f"`paywarden {' '.join(path)} --help` took {seconds:.2f} s of CPU"
    assert list(tmp_path.iterdir()) == [], "--help created a file"


def test_help_loads_no_service() -> None:
    code = "import sys, server.cli.main; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [str(Path(PAYWARDEN).with_name("python")), "-c", code], capture_output=True, text=True, check=True
    )
    loaded = set(done.stdout.split())
    assert sorted(m for m in HEAVY_MODULES if m in loaded) == []


def test_constants_written_out_for_help_agree_with_their_services() -> None:
    from auth.tokens import DEFAULT_TTL_SECONDS
    from server.catalog.bazaar import MAX_ITEMS

    assert token.DEFAULT_TTL_SECONDS == DEFAULT_TTL_SECONDS
    assert catalog.BAZAAR_MAX_ITEMS == MAX_ITEMS


def _files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def acme(tmp_path: Path) -> str:
    """A migrated SQLite database, in its own directory, with an organisation `acme`."""
    home = tmp_path / "paywarden"
    home.mkdir()
    url = f"sqlite:///{home / 'paywarden.db'}"
    run_cli(url, "migrate", "--json").json()
    run_cli(url, "admin", "org", "create", "acme", "--json").json()
    return url


UNREACHABLE_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:1/paywarden"

# (case, command, database URL or None for the `acme` database, what the one line must say)
MISTAKES = [
    (
        "bad path",
        ["admin", "agent", "list", "--org", "acme"],
        "sqlite:////no-such-directory/paywarden.db",
        "no directory /no-such-directory for the database",
    ),
    (
        "bad path, migrate",
        ["migrate"],
        "sqlite:////no-such-directory/paywarden.db",
        "no directory /no-such-directory for the database",
    ),
    (
        "unreachable PostgreSQL",
        ["admin", "agent", "list", "--org", "acme"],
        UNREACHABLE_POSTGRES,
        "cannot use the database: ",
    ),
    (
        "missing database in another directory",
        ["admin", "agent", "list", "--org", "acme"],
        "sqlite:///./paywarden.db",
        "no database at ",
    ),
    (
        "unknown agent name",
        ["admin", "policy", "set", "nobody", "--daily-cap", "1"],
        None,
        "agent_not_found: No agent with that id or name",
    ),
    (
        "bad scope",
        ["admin", "token", "issue", "--agent", "nobody", "--scopes", "payments:pay"],
        None,
        "unknown scope(s): payments:pay; the scopes are catalog:read payments:read payments:write",
    ),
    (
        "bad role",
        ["admin", "member", "create", "--org", "acme", "--email", "ana@acme.example", "--role", "boss"],
        None,
        "The role must be one of owner, admin, approver, viewer.",
    ),
]


@pytest.mark.parametrize(("case", "command", "database_url", "said"), MISTAKES, ids=[m[0] for m in MISTAKES])
def test_a_mistake_is_one_line_and_leaves_nothing_behind(
    case: str, command: list[str], database_url: str | None, said: str, acme: str, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = _files_under(tmp_path)
    # Without PAYWARDEN_MASTER_KEY a key file next to a new SQLite file is what a command could create.
    key = None if database_url is not None and database_url.startswith("sqlite:") else TEST_MASTER_KEY
    done = paywarden(*command, cwd=elsewhere, database_url=database_url or acme, master_key=key, timeout=60)
    assert done.code == 1, (case, done)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"{case}: {done.stderr}"
    assert lines[0].startswith("error: "), (case, lines[0])
    assert said in lines[0], (case, lines[0])
    if database_url == "sqlite:///./paywarden.db":
        assert "run `paywarden migrate`" in lines[0]
    assert _files_under(tmp_path) == before, f"{case} created files"


def test_agents_are_named_by_name_or_id_and_policy_set_without_a_change_changes_nothing(acme: str) -> None:
    created = run_cli(
        acme, "admin", "agent", "create", "--org", "acme", "--name", "researcher", "--json"
    ).json()
    first = run_cli(acme, "admin", "policy", "set", "researcher", "--daily-cap", "2", "--json").json()
    assert first["agentId"] == created["agentId"]
    assert first["policyVersion"] == 2
    unchanged = run_cli(acme, "admin", "policy", "set", "researcher", "--json").json()
    same_value = run_cli(acme, "admin", "policy", "set", created["agentId"], "--daily-cap", "2.00", "--json")
    assert unchanged["policyVersion"] == 2
    assert same_value.json()["policyVersion"] == 2
    shown = run_cli(acme, "admin", "agent", "show", "researcher", "--json").json()
    assert shown["policyVersion"] == 2
    assert shown["agentId"] == created["agentId"]


def test_a_name_two_organisations_use_needs_the_id(acme: str) -> None:
    run_cli(acme, "admin", "org", "create", "globex", "--json").json()
    for org in ("acme", "globex"):
        run_cli(acme, "admin", "agent", "create", "--org", org, "--name", "researcher", "--json").json()
    refused = run_cli(acme, "admin", "agent", "show", "researcher")
    assert refused.exit_code == 1
    assert "agent_name_ambiguous" in refused.stderr


def test_human_output_is_aligned_words_not_a_python_repr(acme: str) -> None:
    run_cli(acme, "admin", "agent", "create", "--org", "acme", "--name", "researcher", "--json").json()
    done = run_cli(acme, "admin", "policy", "set", "researcher", "--allow-host", "api.example.com")
    assert done.exit_code == 0, done.stderr
    assert "{'" not in done.stdout
    assert "None" not in done.stdout
    lines = done.stdout.splitlines()
    assert any(line.split() == ["allow", "hosts", "api.example.com"] for line in lines), done.stdout
    assert any(line.split()[:3] == ["policy", "version", "2"] for line in lines), done.stdout


def test_demo_makes_its_database_in_a_new_directory(tmp_path: Path) -> None:
    done = paywarden("demo", "--json", cwd=tmp_path, database_url="sqlite:///./paywarden.db", master_key=None)
    assert done.json()["agentId"].startswith("agt_")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".paywarden-master-key", "paywarden.db"]


def test_demo_prints_its_token_again_until_it_is_revoked(acme: str) -> None:
    first = run_cli(acme, "demo", "--json").json()
    again = run_cli(acme, "demo", "--json").json()
    assert (again["tokenId"], again["token"]) == (first["tokenId"], first["token"])
    run_cli(acme, "admin", "token", "revoke", first["tokenId"], "--json").json()
    fresh = run_cli(acme, "demo", "--json").json()
    assert fresh["tokenId"] != first["tokenId"]
    assert fresh["token"] != first["token"]
    # The printed token is one the server accepts: the stored hash is of exactly this secret.
    with Database(acme).read() as session:
        row = session.get(AccessToken, fresh["tokenId"])
        assert row is not None
        assert row.token_hash == hash_secret(fresh["token"])
