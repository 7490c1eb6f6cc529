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


def paywarden(*args: str, cwd: Path, database_url: str, env: Mapping[str, str] | None = None) -> Run:
    """The installed `paywarden` command in a subprocess, with only the PAYWARDEN_* variables given."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("PAYWARDEN_") or key == "PAYWARDEN_REQUIRE_ALL_TESTS"
    }
    environ.update(
        {"PAYWARDEN_DATABASE_URL": database_url, "PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY, **(env or {})}
    )
    done = subprocess.run(
        [PAYWARDEN, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120, check=False
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
    env: Mapping[str, str] | None = None,
) -> CliResult:
    env = {
        "PAYWARDEN_DATABASE_URL": database_url,
        "PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY,
        "PAYWARDEN_PUBLIC_URL": public_url,
        **(env or {}),
    }
    result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)
