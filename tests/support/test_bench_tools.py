"""The benchmark tools that run outside `make test`: percentiles, the benchmark table's rewrite, and the
load test's reading of MCP answers. Fast and pure, so they stay honest in the default run."""

from __future__ import annotations

import json

import pytest

from tests.bench.harness import BenchTable, Floor, Row, infra_script, percentile
from tests.bench.readme import BEGIN, END, PERFORMANCE, rewrite

loadtest = infra_script("loadtest")


def test_percentiles_are_nearest_rank() -> None:
    samples = [float(n) for n in range(1, 101)]
    assert percentile(samples, 0.5) == 50.0
    assert percentile(samples, 0.99) == 99.0
    assert percentile(samples, 1.0) == 100.0
    assert percentile([3.0], 0.99) == 3.0
    with pytest.raises(ValueError, match="no samples"):
        percentile([], 0.5)


def test_the_benchmark_table_is_replaced_between_its_markers_only() -> None:
    page = f"intro\n{BEGIN}\nold table\n{END}\n\n## Next\n"
    assert rewrite(page, "| new |\n") == f"intro\n{BEGIN}\n| new |\n{END}\n\n## Next\n"
    with pytest.raises(ValueError, match="needs exactly one"):
        rewrite("no markers", "| new |")
    with pytest.raises(ValueError, match="needs exactly one"):
        rewrite(f"{END}\n{BEGIN}", "| new |")


def test_the_performance_page_has_its_markers() -> None:
    assert "| new |" in rewrite(PERFORMANCE.read_text(encoding="utf-8"), "| new |")


def test_the_table_groups_rows_by_benchmark_in_first_seen_order() -> None:
    table = BenchTable()
    for name, database in [("b", "SQLite"), ("a", "SQLite"), ("b", "PostgreSQL")]:
        table.rows.append(Row(name, database, "case", "p50", "1 ms", "< 2 ms", True))
    lines = table.markdown().splitlines()[2:]
    assert [line.split(" | ")[0:2] for line in lines] == [
        ["| b", "SQLite"],
        ["| b", "PostgreSQL"],
        ["| a", "SQLite"],
    ]
    assert all(line.endswith("| yes |") for line in lines)


def test_rows_are_put_against_the_floor_of_their_database_and_client() -> None:
    table = BenchTable()
    rows = [
        Row("reads", "SQLite", "c", "p50", "6 ms", raw={"p50_s": 0.006}),
        Row("reads", "SQLite", "c", "p50", "9 ms", raw={"p50_s": 0.009}, client="official"),
        Row("reads", "PostgreSQL", "c", "calls/s", "150/s", raw={"per_second": 150.0}),
        Row("engine", "-", "c", "decisions/s", "90,000/s", raw={"per_second": 90_000.0}),
        Row("anatomy", "SQLite", "c", "per call", "8 statements", raw={"statements": 8.0}),
    ]
    table.rows.extend(rows)
    assert [table.of_floor(row) for row in rows] == [""] * len(rows)  # no floor measured: no multiple
    table.floors["SQLite"] = Floor(p50_s={"lean": 0.002, "official": 0.003}, per_second={"lean": 600.0})
    table.floors["PostgreSQL"] = Floor(p50_s={"lean": 0.003}, per_second={"lean": 300.0})
    assert [table.of_floor(row) for row in rows] == ["3.00× p50", "3.00× p50", "0.50× rate", "150× rate", ""]
    header, _, *lines = table.markdown().splitlines()
    assert header.split(" | ")[5] == "× floor"
    assert lines[0].split(" | ")[5] == "3.00× p50"


def test_the_load_test_reads_json_and_event_stream_answers() -> None:
    answer = {"jsonrpc": "2.0", "id": 1, "result": {"isError": False}}
    assert loadtest._jsonrpc_message("application/json", json.dumps(answer).encode()) == answer
    stream = f"event: message\ndata: {json.dumps(answer)}\n\n".encode()
    assert loadtest._jsonrpc_message("text/event-stream", stream) == answer


def test_the_load_test_counts_tool_errors_and_only_calls_in_its_window() -> None:
    failed = {"isError": True, "structuredContent": {"error": {"code": "policy_denied", "message": "no"}}}
    assert loadtest._tool_error(failed) == ("tool_policy_denied", "no")
    assert loadtest._tool_error({"isError": False}) is None
    outcomes = [
        loadtest.Outcome("get_budget", started=0.5, elapsed=0.010),  # warm-up: not counted
        loadtest.Outcome("get_budget", started=1.0, elapsed=0.020),
        loadtest.Outcome("get_budget", started=2.0, elapsed=0.040, error="tool_policy_denied"),
    ]
    summary = loadtest.summarise(outcomes, ["get_budget"], window_start=1.0, window_s=2.0)
    assert summary["total"]["calls"] == 2
    assert summary["total"]["errors"] == 1
    assert summary["total"]["per_second"] == 1.0
    assert summary["error_kinds"] == {"tool_policy_denied": 1}
    assert summary["outside_window"] == 1


def test_a_call_spec_is_a_tool_name_or_a_json_object() -> None:
    assert loadtest.parse_call("get_budget") == loadtest.Call("get_budget", {}, "get_budget")
    spec = '{"tool": "fetch_paid", "arguments": {"url": "https://a.example/x"}, "label": "paid", "every": 10}'
    assert loadtest.parse_call(spec) == loadtest.Call(
        "fetch_paid", {"url": "https://a.example/x"}, "paid", 10
    )
