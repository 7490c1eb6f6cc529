"""/metrics: the numbers of every process sharing a directory, labels from closed sets only, and
the token it may ask for."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from server.kit import metrics
from server.kit.db import Database
from tests.support.chain import free_port
from tests.support.oauth import call_tool, rpc_result
from tests.support.paywarden import RunningServer, serve, settings_for
from tests.support.processes import ServeProcess, paywarden_command, server_environ
from tests.support.tenants import make_agent

# Every label any of our metrics may have: each names a closed set (docs/operations.md).
CLOSED_LABELS = {"tool", "outcome", "reason", "state", "status_class", "method"}
METRICS_TOKEN = "scrape-me-please-0123456789"


def _total(text: str, name: str, **labels: str) -> float:
    found = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                found += sample.value
    return found


def test_every_label_of_every_metric_is_a_closed_set() -> None:
    ours = [
        value
        for value in vars(metrics).values()
        if hasattr(value, "_labelnames") and getattr(value, "_name", "").startswith("paywarden_")
    ]
    assert len(ours) >= 7
    for metric in ours:
        assert set(metric._labelnames) <= CLOSED_LABELS, metric._name
    exposed = {family.name for family in REGISTRY.collect() if family.name.startswith("paywarden_")}
    assert {"paywarden_tool_calls", "paywarden_db_connections_in_use"} <= exposed
    snapshot_labels = {
        label
        for family in metrics.Snapshot({"settled": 1}, 2.0).collect()
        for sample in family.samples
        for label in sample.labels
    }
    assert snapshot_labels <= CLOSED_LABELS


def test_an_unknown_rpc_method_is_counted_as_other() -> None:
    assert metrics.rpc_method_label("eth_getLogs") == "eth_getLogs"
    assert metrics.rpc_method_label("https://rpc.example/secret-key") == "other"
    assert metrics.status_class(402) == "4xx"
    assert metrics.status_class(999) == "other"


_PROCESS = """
import sys
from server.kit.metrics import DB_CONNECTIONS_IN_USE, TOOL_CALLS, process_stopping
TOOL_CALLS.labels(tool="get_budget", outcome="ok").inc()
DB_CONNECTIONS_IN_USE.inc()
if sys.argv[1] == "stops":
    process_stopping()
"""


def test_processes_sharing_a_directory_add_up_and_a_stopped_one_leaves_its_live_gauge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    environ = {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for how in ("stops", "stops", "crashes"):
        subprocess.run([sys.executable, "-c", _PROCESS, how], env=environ, check=True, timeout=60)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    text = metrics.exposition(metrics.Snapshot({"settled": 4}, 1.5)).decode()
    assert _total(text, "paywarden_tool_calls_total", tool="get_budget", outcome="ok") == 3
    # Two stopped cleanly and took their connections with them; the one that crashed did not.
    assert _total(text, "paywarden_db_connections_in_use") == 1
    assert _total(text, "paywarden_payments", state="settled") == 4
    assert _total(text, "paywarden_audit_head_age_seconds") == 1.5


@pytest.mark.slow
def test_the_workers_of_one_serve_answer_for_each_other(sqlite_db: Database, tmp_path: Path) -> None:
    port = free_port()
    environ = server_environ(database_url=sqlite_db.url, public_url=f"http://127.0.0.1:{port}", extra={})
    environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process = ServeProcess(port=port, environ=environ, workdir=tmp_path, workers=2)
    process.start()
    try:
        deadline = time.monotonic() + 90
        while not process.ready():
            assert time.monotonic() < deadline, process.output()
            time.sleep(0.2)  # bounded polling of /readyz, not a wait for something to happen
        settings = settings_for(database_url=sqlite_db.url, port=port)
        token = make_agent(sqlite_db, settings, allow_hosts=["api.example.com"]).token
        calls = 12
        for _ in range(calls):
            answer = rpc_result(call_tool(process.mcp_url, token, "get_budget"))
            assert answer["result"]["isError"] is False, answer
        # Each scrape reaches one worker or the other (they share the port); each tells the sum.
        for _ in range(4):
            text = httpx.get(f"{process.base_url}/metrics", timeout=10).text
            assert _total(text, "paywarden_tool_calls_total", tool="get_budget", outcome="ok") == calls
        shared = re.search(r"metrics shared in (\S+)\)", process.output())
        assert shared is not None, process.output()
        assert Path(shared.group(1)).is_dir()
    finally:
        process.stop()
    assert not Path(shared.group(1)).exists()  # serve made it, serve removed it


@pytest.fixture(scope="module")
def guarded(module_sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(module_sqlite_db.url, extra={"PAYWARDEN_METRICS_TOKEN": METRICS_TOKEN}) as server:
        yield server


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong-token-0123456789", f"Basic {METRICS_TOKEN}", METRICS_TOKEN]
)
def test_with_a_metrics_token_a_scrape_without_it_is_refused(
    guarded: RunningServer, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    answer = httpx.get(f"{guarded.base_url}/metrics", headers=headers, timeout=10)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    assert "paywarden_" not in answer.text


def test_with_a_metrics_token_a_scrape_with_it_is_answered(guarded: RunningServer) -> None:
    answer = httpx.get(
        f"{guarded.base_url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=10
    )
    assert answer.status_code == 200
    assert "paywarden_tool_calls" in answer.text


def test_serve_refuses_a_metrics_directory_that_does_not_exist(sqlite_db: Database, tmp_path: Path) -> None:
    missing = tmp_path / "not-there"
    environ = server_environ(database_url=sqlite_db.url, public_url="http://127.0.0.1:1", extra={})
    environ["PROMETHEUS_MULTIPROC_DIR"] = str(missing)
    done = subprocess.run(
        [str(paywarden_command()), "serve", "--port", str(free_port())],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"PROMETHEUS_MULTIPROC_DIR: {missing} is not a directory" in done.stderr
