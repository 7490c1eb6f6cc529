"""What every benchmark shares: its settings (durations from the environment), percentiles, and the one
Markdown table the whole run contributes to.

`PAYWARDEN_BENCH_QUICK=1` shortens every benchmark to a smoke run that still goes end to end; each
size or duration can also be set on its own (see `BenchSettings`). Rows land in one table that
`make bench` prints at the end and writes to `.pytest_cache/bench/results.md` (and the raw numbers
to `results.json`), ready for `make bench-readme`.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
RESULTS_DIR = ROOT / ".pytest_cache" / "bench"
RESULTS_MD = RESULTS_DIR / "results.md"
RESULTS_JSON = RESULTS_DIR / "results.json"


def quick() -> bool:
    return os.environ.get("PAYWARDEN_BENCH_QUICK") == "1"


def setting(name: str, full: int, quick_value: int) -> int:
    """An integer from PAYWARDEN_BENCH_<name>, else the full or the quick default."""
    raw = os.environ.get(f"PAYWARDEN_BENCH_{name}")
    if raw:
        return int(raw.replace("_", ""))
    return quick_value if quick() else full


def seconds(name: str, full: float, quick_value: float) -> float:
    raw = os.environ.get(f"PAYWARDEN_BENCH_{name}")
    if raw:
        return float(raw)
    return quick_value if quick() else full


def int_list(name: str, full: Sequence[int], quick_value: Sequence[int]) -> list[int]:
    raw = os.environ.get(f"PAYWARDEN_BENCH_{name}")
    if raw:
        return [int(part.replace("_", "")) for part in raw.split(",") if part.strip()]
    return list(quick_value if quick() else full)


@dataclass(frozen=True)
class BenchSettings:
    """Every knob, with its environment variable (PAYWARDEN_BENCH_ + the name in capitals)."""

    # 1 and 2: paid fetch_paid against the x402 SDK client, alternating rounds.
    fetch_rounds: int = field(default_factory=lambda: setting("FETCH_ROUNDS", 200, 15))
    rpc_delay_ms: int = field(default_factory=lambda: setting("RPC_DELAY_MS", 100, 100))
    # 3: decisions per second, seconds per cell of the matrix.
    engine_seconds: float = field(default_factory=lambda: seconds("ENGINE_SECONDS", 2.0, 0.5))
    reserve_seconds: float = field(default_factory=lambda: seconds("RESERVE_SECONDS", 3.0, 0.5))
    agent_counts: list[int] = field(
        default_factory=lambda: int_list("AGENTS", (1, 100, 10_000), (1, 100, 1_000))
    )
    rule_counts: list[int] = field(default_factory=lambda: int_list("RULES", (0, 10, 100), (0, 10, 100)))
    # 4: the cap race.
    race_calls: int = field(default_factory=lambda: setting("RACE_CALLS", 2000, 400))
    race_paid: int = field(default_factory=lambda: setting("RACE_PAID", 200, 40))
    race_sellers: int = field(default_factory=lambda: setting("RACE_SELLERS", 4, 4))
    # 5: reads over a large ledger.
    ledger_rows: int = field(default_factory=lambda: setting("ROWS", 1_000_000, 50_000))
    read_calls: int = field(default_factory=lambda: setting("READ_CALLS", 300, 60))
    # 6: many sessions.
    sessions: int = field(default_factory=lambda: setting("SESSIONS", 200, 200))
    session_seconds: float = field(default_factory=lambda: seconds("SESSION_SECONDS", 60.0, 8.0))
    throughput_seconds: float = field(default_factory=lambda: seconds("THROUGHPUT_SECONDS", 15.0, 4.0))
    # Profiles of the server under load, with py-spy (PAYWARDEN_BENCH_PROFILE=1).
    # "1" (or "cpu"): threads holding the GIL, i.e. Python's CPU; "wall": every thread, waits included.
    profile: str = field(default_factory=lambda: os.environ.get("PAYWARDEN_BENCH_PROFILE", ""))


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (0 < fraction <= 1) of `samples`."""
    if not samples:
        raise ValueError("no samples")
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), math.ceil(fraction * len(ordered))))
    return ordered[rank - 1]


def ms(value_s: float) -> str:
    return f"{value_s * 1000:.1f} ms"


def rate(value: float) -> str:
    return f"{value:,.0f}/s"


@dataclass(frozen=True)
class Row:
    benchmark: str  # which benchmark, e.g. "fetch_paid vs x402 SDK client"
    database: str  # "SQLite", "PostgreSQL" or "-"
    case: str  # what was varied, e.g. "100 rules, 4 processes"
    measure: str  # what the value is, e.g. "p50", "decisions/s"
    value: str
    target: str = ""
    met: bool | None = None
    raw: dict[str, float] = field(default_factory=dict)
    # Which client's floor a latency or a rate of this row is put against ("lean" or "official").
    client: str = "lean"


# The raw numbers a row is put against the floor by: a p50 divided by the floor's p50 (one call at a
# time), a rate divided by the floor's rate (32 sessions on one process).
FLOOR_KEYS = (("p50_s", "p50"), ("per_second", "rate"))


@dataclass(frozen=True)
class Floor:
    """The MCP floor of one database, measured in this run (tests/bench/test_floor.py)."""

    p50_s: dict[str, float]  # by client: one call at a time
    per_second: dict[str, float]  # by client: 32 sessions against one process


@dataclass
class BenchTable:
    rows: list[Row] = field(default_factory=list)
    floors: dict[str, Floor] = field(default_factory=dict)  # by database: "SQLite", "PostgreSQL"

    def of_floor(self, row: Row) -> str:
        """The row's p50 or rate as a multiple of its database's floor (SQLite's for a row of no
        database), for the same client; empty when the run measured no floor or the row has neither."""
        floor = self.floors.get(row.database) or self.floors.get("SQLite")
        if floor is None:
            return ""
        for key, word in FLOOR_KEYS:
            value = row.raw.get(key)
            base = getattr(floor, key).get(row.client)
            if value is not None and base:
                multiple = value / base
                return f"{multiple:,.2f}× {word}" if multiple < 10 else f"{multiple:,.0f}× {word}"
        return ""

    def add(self, row: Row) -> None:
        self.rows.append(row)
        met = "" if row.met is None else (" (target met)" if row.met else f" (target {row.target}: MISSED)")
        print(f"  {row.benchmark} | {row.database} | {row.case} | {row.measure}: {row.value}{met}")

    def ordered(self) -> list[Row]:
        """Rows grouped by benchmark, in the order each benchmark first reported."""
        first = {name: index for index, name in reversed(list(enumerate(row.benchmark for row in self.rows)))}
        return sorted(self.rows, key=lambda row: first[row.benchmark])

    def markdown(self) -> str:
        lines = [
            "| benchmark | database | case | measure | value | × floor | target | met |",
            "| --- | --- | --- | --- | ---: | ---: | --- | --- |",
        ]
        for row in self.ordered():
            met = "" if row.met is None else ("yes" if row.met else "**no**")
            cells = [
                row.benchmark,
                row.database,
                row.case,
                row.measure,
                row.value,
                self.of_floor(row),
                row.target,
                met,
            ]
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
        return "\n".join(lines)

    def write(self) -> Path:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        header = run_description()
        RESULTS_MD.write_text(f"{header}\n\n{self.markdown()}\n", encoding="utf-8")
        RESULTS_JSON.write_text(
            json.dumps(
                {
                    "run": header,
                    "floors": {name: asdict(floor) for name, floor in self.floors.items()},
                    "rows": [{**asdict(row), "of_floor": self.of_floor(row)} for row in self.ordered()],
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
        return RESULTS_MD


def run_description() -> str:
    """One line saying when, on what and how the numbers were taken."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        commit = ""
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    mode = "quick (PAYWARDEN_BENCH_QUICK=1)" if quick() else "full"
    return (
        f"Measured {time.strftime('%Y-%m-%d', time.gmtime())} at commit {commit or '?'}, {mode} mode, "
        f"{os.cpu_count()} CPU(s), Python {platform.python_version()}, load average {load} at the end."
    )


def met_at_most(value: float, limit: float) -> bool:
    return value <= limit


def met_at_least(value: float, floor: float) -> bool:
    return value >= floor


def infra_script(name: str) -> ModuleType:
    """A script of infra/ as a module (infra/ is scripts, not a package)."""
    path = ROOT / "infra" / f"{name}.py"
    module_name = f"paywarden_infra_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def infra_path(name: str) -> Path:
    return ROOT / "infra" / f"{name}.py"
