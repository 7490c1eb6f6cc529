"""Run the real `paywarden` command in a subprocess, as an operator would."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
