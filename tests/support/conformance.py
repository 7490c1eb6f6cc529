"""Run the official MCP conformance suite (npm `@modelcontextprotocol/conformance`) against a server.

The suite needs Node.js 22; both come from npm into tests/support/node (`make test-deps`, or
`make test` when npm is there), pinned by its package-lock.json. Its `server` command sends no
credentials, so `conformance_bearer.mjs`, loaded with `NODE_OPTIONS=--import`, adds the agent
token to every request it makes to the server under test.

Each scenario runs in its own `conformance server --scenario NAME -o DIR` process; the verdict is
read from the `checks.json` it writes, check by check, not from its exit code alone.

The `authorization` command (authorization-server scenarios) exists only from 0.2.0 on, which npm
has as pre-releases: that version is installed beside 0.1.16 under the alias `conformance-next`
(`AuthorizationRun`). It prints an authorization URL for a person to open, listens for the
redirect on 127.0.0.1, and exchanges the code itself.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node" / "node_modules"
SUITE_ENTRY = NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BEARER_MODULE = HERE / "conformance_bearer.mjs"
SUITE_VERSION = "0.1.16"
AUTHORIZATION_SUITE_ENTRY = NODE_MODULES / "conformance-next" / "dist" / "index.js"
AUTHORIZATION_SUITE_VERSION = "0.2.0-alpha.12"
AUTHORIZATION_SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")
SUITE_MISSING = (
    "Node.js 22 and the MCP conformance suite are not installed: run `make test-deps` "
    "(npm ci --prefix tests/support/node)"
)

# The server scenarios that apply to a server without the suite's fixture tools (test_simple_text,
# test_image_content...), prompts or resources: Paywarden has its own tools only.
SERVER_SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
)
SCENARIO_TIMEOUT_S = 60.0

# Scenarios that test nothing against a stateless endpoint, with the one warning they end on instead.
# server-sse-multiple-streams opens its streams inside a session: without an Mcp-Session-Id it
# writes this warning and stops (exit 0). When /mcp hands out sessions the scenario runs for real,
# and `problems()` then asks for the entry to be removed, so the check cannot stay vacuous.
# Scenarios that can only warn against this server, by name, with the warning they end on: none
# since /mcp serves sessions (`server-sse-multiple-streams` used to need one).
VACUOUS_WITHOUT_SESSIONS: dict[str, str] = {}


def node22() -> Path | None:
    """$PAYWARDEN_NODE22, else the Node.js 22 that npm put in tests/support/node; None if neither."""
    override = os.environ.get("PAYWARDEN_NODE22")
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    binary = Path(override) if override else NODE_MODULES / f"node-linux-{arch}" / "bin" / "node"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def suite_installed() -> bool:
    return node22() is not None and SUITE_ENTRY.is_file()


def authorization_suite_installed() -> bool:
    return node22() is not None and AUTHORIZATION_SUITE_ENTRY.is_file()


@dataclass(frozen=True)
class Check:
    scenario: str
    id: str
    name: str
    status: str  # SUCCESS, FAILURE, WARNING, SKIPPED or INFO
    message: str | None
    details: Any

    def describe(self) -> str:
        text = f"{self.scenario} / {self.id} ({self.name}): {self.status}"
        if self.message:
            text += f": {self.message}"
        if self.status == "FAILURE" and self.details is not None:
            text += f"\n    details: {json.dumps(self.details, default=str)[:1500]}"
        return text


@dataclass(frozen=True)
class ScenarioRun:
    scenario: str
    exit_code: int
    checks: tuple[Check, ...]
    output: str

    @property
    def failures(self) -> list[Check]:
        return [check for check in self.checks if check.status == "FAILURE"]

    @property
    def warnings(self) -> list[Check]:
        return [check for check in self.checks if check.status == "WARNING"]

    def problems(self, *, vacuous_warning: str | None = None) -> list[str]:
        """Why this run does not count as a pass; empty when it does.

        A run must exit 0 with no failing check and at least one passing one: a run that passed
        nothing proved nothing. `vacuous_warning` names the single warning a scenario is known to
        end on against this server instead (see VACUOUS_WITHOUT_SESSIONS); the run must then be
        exactly that, or the exception is stale.
        """
        found = [f"FAILED {check.describe()}" for check in self.failures]
        if self.exit_code != 0:
            found.append(f"{self.scenario}: the suite exited with {self.exit_code}")
        passing = [check for check in self.checks if check.status == "SUCCESS"]
        if vacuous_warning is None:
            if not passing:
                found.append(f"{self.scenario}: no check passed ({self.summary()})")
        elif [(c.id, c.status) for c in self.checks] != [(vacuous_warning, "WARNING")]:
            found.append(
                f"{self.scenario}: expected only the warning {vacuous_warning} (the scenario cannot run "
                f"without sessions), got {self.summary()}: if it now runs, drop its exception"
            )
        return found

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for check in self.checks:
            counts[check.status] = counts.get(check.status, 0) + 1
        tally = ", ".join(f"{n} {status.lower()}" for status, n in sorted(counts.items())) or "no checks"
        return f"{self.scenario}: exit {self.exit_code}, {tally}"


def run_server_scenario(
    mcp_url: str, scenario: str, *, token: str, output_dir: Path, timeout_s: float = SCENARIO_TIMEOUT_S
) -> ScenarioRun:
    """One scenario of the suite's `server` command against `mcp_url`, with `token` as bearer."""
    node = node22()
    if node is None or not SUITE_ENTRY.is_file():
        raise FileNotFoundError(SUITE_MISSING)
    results = output_dir / scenario
    results.mkdir(parents=True, exist_ok=True)
    environ = {
        **os.environ,
        "NODE_OPTIONS": f"--import={BEARER_MODULE.as_uri()}",
        "PAYWARDEN_CONFORMANCE_URL": mcp_url,
        "PAYWARDEN_CONFORMANCE_TOKEN": token,
        "PAYWARDEN_CONFORMANCE_ENTRY": str(SUITE_ENTRY),
        "NO_COLOR": "1",
    }
    completed = subprocess.run(
        [str(node), str(SUITE_ENTRY), "server", "--url", mcp_url, "--scenario", scenario, "-o", str(results)],
        env=environ,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout_s,
        check=False,
    )
    output = (completed.stdout + completed.stderr).decode("utf-8", "replace")
    return ScenarioRun(
        scenario=scenario,
        exit_code=completed.returncode,
        checks=read_checks(scenario, results),
        output=output,
    )


def read_checks(scenario: str, results: Path) -> tuple[Check, ...]:
    """Every check in the checks.json files the suite wrote under `results` (one per run)."""
    checks: list[Check] = []
    for path in sorted(results.rglob("checks.json")):
        for raw in json.loads(path.read_text()):
            checks.append(
                Check(
                    scenario=scenario,
                    id=str(raw.get("id")),
                    name=str(raw.get("name")),
                    status=str(raw.get("status")),
                    message=raw.get("errorMessage"),
                    details=raw.get("details"),
                )
            )
    return tuple(checks)


def report(runs: list[ScenarioRun], vacuous: dict[str, str]) -> tuple[bool, str]:
    """(all passed, a report): each scenario's tally, then every problem and the suite's output."""
    lines = [run.summary() for run in runs]
    ok = True
    for run in runs:
        problems = run.problems(vacuous_warning=vacuous.get(run.scenario))
        if run.scenario in vacuous and not problems:
            lines.append(
                f"  {run.scenario}: ran nothing, as expected without sessions ({vacuous[run.scenario]})"
            )
        if problems:
            ok = False
            lines.extend(f"  {problem}" for problem in problems)
            lines.append(f"  --- {run.scenario} output ---\n{run.output[-4000:]}")
    return ok, "\n".join(lines)


class AuthorizationRun:
    """`conformance authorization` against an issuer, as a child process (both scenarios).

    `authorization_url()` reads its output until it prints the URL a person must open; `finish()`
    waits for it to exit and returns the run with every check it wrote."""

    def __init__(self, *, issuer: str, client_id: str, resource: str, port: int, output_dir: Path) -> None:
        node = node22()
        if node is None or not AUTHORIZATION_SUITE_ENTRY.is_file():
            raise FileNotFoundError(SUITE_MISSING)
        self.output_dir = output_dir
        self.lines: list[str] = []
        self._process = subprocess.Popen(
            [
                str(node),
                str(AUTHORIZATION_SUITE_ENTRY),
                "authorization",
                "--url",
                issuer,
                "--client-id",
                client_id,
                "--resource",
                resource,
                "--port",
                str(port),
                "-o",
                str(output_dir),
            ],
            env={**os.environ, "NO_COLOR": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self._issuer = issuer

    def authorization_url(self) -> str:
        """Blocks until the suite prints the authorization URL (call it from a worker thread)."""
        assert self._process.stdout is not None
        prefix = f"{self._issuer}/oauth/authorize?"
        for line in self._process.stdout:
            self.lines.append(line)
            if line.strip().startswith(prefix):
                return line.strip()
        raise RuntimeError("the suite ended without printing an authorization URL:\n" + "".join(self.lines))

    def finish(self, timeout_s: float = SCENARIO_TIMEOUT_S) -> ScenarioRun:
        """Blocks until the suite exits (call it from a worker thread)."""
        assert self._process.stdout is not None
        rest, _ = self._process.communicate(timeout=timeout_s)
        self.lines.append(rest or "")
        return ScenarioRun(
            scenario="authorization",
            exit_code=self._process.returncode,
            checks=read_checks("authorization", self.output_dir),
            output="".join(self.lines),
        )

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)
