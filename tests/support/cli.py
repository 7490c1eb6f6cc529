"""Run `paywarden` commands in-process against a test database, as an operator would."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from typer.testing import CliRunner

from server.cli import app
from tests.support.paywarden import TEST_MASTER_KEY


@dataclass(frozen=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        assert self.exit_code == 0, f"exit {self.exit_code}: {self.stderr}"
        document: dict[str, Any] = json.loads(self.stdout)
        return document


def run_cli(database_url: str, *args: str, public_url: str = "http://127.0.0.1:8402") -> CliResult:
    env = {
        "PAYWARDEN_DATABASE_URL": database_url,
        "PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY,
        "PAYWARDEN_PUBLIC_URL": public_url,
    }
    result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)
