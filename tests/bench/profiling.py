"""Where a server's CPU goes under a benchmark's load, sampled from outside with py-spy.

With `PAYWARDEN_BENCH_PROFILE=1` (or `cpu`), benchmarks wrap their measured phase in
`profiled(pid, name, mode=...)`: py-spy samples the threads of the process (and of its workers, with
`subprocesses=True`) that hold the GIL, which is where the server's Python CPU goes. With
`PAYWARDEN_BENCH_PROFILE=wall` it samples every thread, waiting ones included (on the database, the
chain, a lock), which is where a call's time goes. Collapsed stacks land in
`.pytest_cache/bench/profiles/<name>.txt` (load them into speedscope or flamegraph.pl), and a summary
is printed: the share of samples by package and by innermost function, and the Paywarden functions
with the most time below them.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.bench.harness import RESULTS_DIR, ROOT

PROFILES = RESULTS_DIR / "profiles"
FRAME = re.compile(r"^(?P<function>.*?) \((?P<file>[^()]*?)(?::\d+)?\)$")
OURS = (str(ROOT / "server") + "/", str(ROOT / "auth") + "/")
PACKAGES = (
    ("sqlalchemy", ("/sqlalchemy/", "/sqlmodel/")),
    ("database driver", ("/psycopg", "sqlite3", "/psycopg_binary/")),
    ("mcp sdk", ("/mcp/", "/mcp_types/")),
    ("pydantic", ("/pydantic", "pydantic_core")),
    ("http server", ("/uvicorn/", "/starlette/", "/h11/", "/httptools/", "sse_starlette")),
    ("http client", ("/httpx", "/httpcore/", "/h2/")),
    (
        "web3 / eth-account",
        ("/web3/", "/eth_", "/eth_account/", "/eth_abi/", "/hexbytes/", "/ckzg", "coincurve"),
    ),
    ("json", ("/json/",)),
    (
        "asyncio / anyio / threads",
        ("/asyncio/", "/anyio/", "threading.py", "concurrent/futures", "selectors.py"),
    ),
    ("logging", ("/logging/", "pythonjsonlogger")),
    ("benchmark harness", ("/tests/",)),
)


def py_spy() -> str | None:
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.is_file() else shutil.which("py-spy")


@contextmanager
def profiled(pid: int, name: str, *, mode: str, subprocesses: bool = False) -> Iterator[None]:
    """Profile `pid` while inside, if `mode` asks for it ("", "1", "cpu" or "wall")."""
    binary = py_spy()
    enabled = mode not in ("", "0")
    if not enabled or binary is None:
        if enabled:
            print("  (py-spy not installed: `make bench` installs it; no profile taken)")
        yield
        return
    PROFILES.mkdir(parents=True, exist_ok=True)
    output = PROFILES / f"{name}.txt"
    command = [binary, "record", "--pid", str(pid), "--format", "raw", "--output", str(output)]
    command += ["--rate", "250", "--nonblocking", "--full-filenames"]
    command += ["--idle"] if mode == "wall" else ["--gil"]
    command += ["--subprocesses"] if subprocesses else []
    log = (PROFILES / f"{name}.log").open("wb")
    recorder = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(timeout=60)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait(timeout=10)
        log.close()
        if output.is_file():
            print(summary(output))
        else:
            print(f"  (py-spy wrote no profile; see {PROFILES / (name + '.log')})")


def _package(path: str) -> str:
    if path.startswith(OURS):
        return "paywarden"
    for label, needles in PACKAGES:
        if any(needle in path for needle in needles):
            return label
    return "other"


def _frames(stack: str) -> list[tuple[str, str]]:
    frames = []
    for raw in stack.split(";"):
        match = FRAME.match(raw.strip())
        if match:
            frames.append((match["function"], match["file"]))
        else:
            frames.append((raw.strip(), ""))
    return frames


def summary(path: Path, *, top: int = 15) -> str:
    """Share of samples by package and function (where the sample was), and by Paywarden function
    (inclusive)."""
    by_package: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [frame for frame in _frames(stack) if not frame[0].startswith("process ")]
        frames = [frame for frame in frames if not frame[0].startswith("thread ")]
        if not frames:
            continue
        total += count
        by_package[_package(frames[-1][1])] += count
        leaves[f"{frames[-1][0]} ({_short(frames[-1][1])})"] += count
        ours = {f"{function} ({_short(file)})" for function, file in frames if _package(file) == "paywarden"}
        for name in ours:
            inclusive[name] += count
    if total == 0:
        return f"  profile {path.name}: no samples"
    lines = [f"  profile {path.name}: {total} samples"]
    lines.append("    by package (of the innermost frame):")
    lines += [f"      {share(n, total)}  {label}" for label, n in by_package.most_common()]
    lines.append("    innermost functions:")
    lines += [f"      {share(n, total)}  {name}" for name, n in leaves.most_common(8)]
    lines.append("    Paywarden functions, time spent in them and below:")
    lines += [f"      {share(n, total)}  {name}" for name, n in inclusive.most_common(top)]
    return "\n".join(lines)


def share(count: int, total: int) -> str:
    return f"{100 * count / total:5.1f}%"


def _short(file: str) -> str:
    if file.startswith(str(ROOT) + "/"):
        return file[len(str(ROOT)) + 1 :]
    if "/site-packages/" in file:
        return file.split("/site-packages/", 1)[1]
    return file.rsplit("/lib/python", 1)[-1]
