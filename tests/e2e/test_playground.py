"""`make try`, end to end: the playground runs as a person starts it, the official MCP client
connects with the token it prints, the cheap route pays on its local chain, the held route answers
with an approval URL under the playground's one origin, and Ctrl-C leaves no process behind."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest
from web3 import Web3

from tests.support.chain import anvil_binary, free_port, load_test_usdc_artifact
from tests.support.fixtures_chain import ANVIL_MISSING
from tests.support.paywarden import mcp_client, structured
from tests.support.playground import CHEAP_ATOMIC, READY_LINE
from tests.support.plugin import require

pytestmark = [pytest.mark.anyio, pytest.mark.chain, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


def session_processes(session_id: int) -> list[str]:
    """Every live process of a session (`pid state command`): all that the playground started, and
    what they started, stay in the session it leads unless one makes a session of its own. A zombie
    has exited (only its parent, or init once it is orphaned, has yet to collect its status)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone while we looked
        command, _, rest = stat.rpartition(")")
        state, _ppid, _group, session = rest.split()[:4]
        if int(session) == session_id and state != "Z":
            found.append(f"{entry.name} {state} {command.partition('(')[2]}")
    return found


class Output:
    """The playground's stdout, read line by line on a thread so a wait can time out."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until_ready(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no ready line in {timeout} s:\n" + "\n".join(self.lines)) from None
            if line is None:
                raise AssertionError("the playground exited before it was ready:\n" + "\n".join(self.lines))
            self.lines.append(line)
            if line.startswith(READY_LINE):
                return "\n".join(self.lines)


def field(text: str, label: str) -> str:
    match = re.search(rf"^  {label}:\s+(\S+)", text, re.M)
    assert match, f"no {label!r} in:\n{text}"
    return match.group(1)


Started = tuple[subprocess.Popen[str], str, int, IO[bytes]]


@pytest.fixture(name="playground")
def fixture_playground(tmp_path: Path) -> Iterator[Started]:
    binary = anvil_binary()
    if binary is None or not binary.is_file():
        require(ANVIL_MISSING)
    port = free_port()
    environ = {name: value for name, value in os.environ.items() if not name.startswith("PAYWARDEN_")}
    environ["TMPDIR"] = str(tmp_path)  # its temporary directory, even when kill -9 leaves it behind
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.playground", "--port", str(port)],
            cwd=ROOT,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            start_new_session=True,  # its own session, as a terminal's job is: we can count it
        )
        try:
            assert process.stdout is not None
            text = Output(process.stdout).until_ready(READY_TIMEOUT_S)
            yield process, text, port, errors
        finally:
            if process.poll() is None:  # the test failed before Ctrl-C: leave nothing running
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=STOP_TIMEOUT_S)


async def test_the_playground_pays_holds_and_stops_with_ctrl_c(
    playground: Started,
) -> None:
    process, text, port, errors = playground
    origin = f"http://localhost:{port}"
    mcp_url, token = field(text, "MCP URL"), field(text, "Agent token")
    cheap, held = field(text, "Cheap route"), field(text, "Held route")
    assert mcp_url == f"{origin}/mcp"
    assert field(text, "Sign up").startswith(f"{origin}/enroll/")
    assert cheap.startswith("http://127.0.0.1:")
    assert held.startswith("http://127.0.0.1:")

    # The chain it prints is the one that pays: read the wallet's TestUSDC there.
    chain = re.search(r"anvil (http://127\.0\.0\.1:\d+) \(chain \d+\), TestUSDC (0x[0-9a-fA-F]{40})", text)
    assert chain, text
    w3 = Web3(Web3.HTTPProvider(chain.group(1)))
    usdc = w3.eth.contract(
        address=Web3.to_checksum_address(chain.group(2)), abi=load_test_usdc_artifact()["abi"]
    )
    wallet = Web3.to_checksum_address(field(text, "Wallet"))

    def balance(address: str) -> int:
        return int(usdc.functions.balanceOf(Web3.to_checksum_address(address)).call())

    before = balance(wallet)
    children = session_processes(process.pid)
    assert any("anvil" in line for line in children), children
    assert any("paywarden" in line for line in children), children

    async with mcp_client(mcp_url, token) as client:
        paid = structured(await client.call_tool("fetch_paid", {"url": cheap}))
        assert paid["status"] == "paid", paid
        assert paid["amountUsd"] == "0.01"
        assert paid["receipt"]["state"] == "settled"
        assert balance(wallet) == before - CHEAP_ATOMIC
        assert balance(paid["payTo"]) == CHEAP_ATOMIC

        waiting = structured(await client.call_tool("fetch_paid", {"url": held}))
        assert waiting["status"] == "pending_approval", waiting
        assert waiting["reason"] == "threshold"
        assert waiting["approvalUrl"].startswith(f"{origin}/approvals/")
        assert balance(wallet) == before - CHEAP_ATOMIC  # a held payment signs nothing

    # Ctrl-C, sent to the playground alone: it must stop what it started itself.
    process.send_signal(signal.SIGINT)
    code = process.wait(timeout=STOP_TIMEOUT_S)
    errors.seek(0)
    assert code == 0, errors.read().decode("utf-8", "replace")
    assert session_processes(process.pid) == []


def gone_within(session_id: int, seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while (left := session_processes(session_id)) and time.monotonic() < deadline:
        time.sleep(0.1)  # bounded polling: orphans get SIGTERM and take a moment to exit
    return left


@pytest.mark.parametrize("stop", ["ctrl-c in a terminal", "kill -9"])
def test_nothing_outlives_the_playground(playground: Started, stop: str) -> None:
    process, _, _, errors = playground
    children = session_processes(process.pid)
    assert len(children) >= 3, children  # the playground, anvil and paywarden serve
    if stop == "kill -9":
        # Nothing runs on the playground's way out: Linux tells its children (PR_SET_PDEATHSIG).
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)
    else:
        # A terminal's Ctrl-C reaches every process of the foreground group at once.
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=STOP_TIMEOUT_S)
        errors.seek(0)
        assert code == 0, errors.read().decode("utf-8", "replace")
    assert gone_within(process.pid, STOP_TIMEOUT_S) == []
