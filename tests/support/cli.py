"""Run `paywarden` commands as an operator would: in a real subprocess (`paywarden`), or in-process
through typer's runner (`run_cli`) where many commands make a test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from server.cli import app
from tests.support.paywarden import TEST_MASTER_KEY

PAYWARDEN = str(Path(sys.executable).with_name("paywarden"))


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        assert self.code == 0, self.stderr
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, f"--json must print exactly one object, got: {self.stdout!r}"
        value = json.loads(lines[0])
        assert isinstance(value, dict)
        return value


def command_environ(
    *, database_url: str, env: Mapping[str, str] | None = None, master_key: str | None = TEST_MASTER_KEY
) -> dict[str, str]:
    """The process environment without any PAYWARDEN_* variable but those given; `master_key=None`
    leaves PAYWARDEN_MASTER_KEY unset (the key file next to a SQLite database is used)."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PAYWARDEN_") or key == "PAYWARDEN_REQUIRE_ALL_TESTS"
    }
    environ["PAYWARDEN_DATABASE_URL"] = database_url
    if master_key is not None:
        environ["PAYWARDEN_MASTER_KEY"] = master_key
    environ.update(env or {})
    return environ


def paywarden(
    *args: str,
    cwd: Path,
    database_url: str,
    env: Mapping[str, str] | None = None,
    master_key: str | None = TEST_MASTER_KEY,
    timeout: float = 120,
) -> Run:
    """The installed `paywarden` command in a subprocess, with only the PAYWARDEN_* variables given."""
    environ = command_environ(database_url=database_url, env=env, master_key=master_key)
    done = subprocess.run(
        [PAYWARDEN, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout, check=False
    )
    return Run(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        assert self.exit_code == 0, f"exit {self.exit_code}: {self.stderr}"
        document: dict[str, Any] = json.loads(self.stdout)
        return document


def run_cli(
    database_url: str,
    *args: str,
    public_url: str = "http://127.0.0.1:8402",
    master_key: str | None = TEST_MASTER_KEY,
    env: Mapping[str, str] | None = None,
    input: str | None = None,
) -> CliResult:
    """A command in this process (typer's runner); `master_key=None` unsets PAYWARDEN_MASTER_KEY;
    `input` is its standard input."""
    environ: dict[str, str | None] = {
        "PAYWARDEN_DATABASE_URL": database_url,
        "PAYWARDEN_MASTER_KEY": master_key,
        "PAYWARDEN_PUBLIC_URL": public_url,
        **(env or {}),
    }
    result = CliRunner().invoke(app, list(args), env=environ, catch_exceptions=False, input=input)
    return CliResult(result.exit_code, result.stdout, result.stderr)


def start_paywarden(
    *args: str,
    cwd: Path,
    database_url: str,
    master_key: str | None = TEST_MASTER_KEY,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[str]:
    """The installed command started in the background (see finish()), for commands run at once."""
    environ = command_environ(database_url=database_url, env=env, master_key=master_key)
    return subprocess.Popen(
        [PAYWARDEN, *args], cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(process: subprocess.Popen[str], *, timeout: float = 120) -> Run:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate(timeout=timeout)
    return Run(process.returncode, stdout, stderr)
