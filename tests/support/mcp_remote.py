"""Run mcp-remote (npm `mcp-remote`, the stdio bridge Claude Desktop uses for remote servers), pinned
in tests/support/node/package-lock.json, against a Paywarden, and speak JSON-RPC through its stdio.

mcp-remote discovers the server's OAuth metadata from the URL it is given, registers itself, prints
"Please authorize this client by visiting: URL" and waits for the redirect on its own callback
server (`http://localhost:PORT/oauth/callback`). Tests read that URL from its log and open it in
Chromium. Its browser opener is pointed at a script that only writes the URL down (`BROWSER`), so
no window opens; what it stores (registration, tokens) goes to a directory of the test's own.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

from tests.support.conformance import NODE_MODULES, node22

ENTRY = NODE_MODULES / "mcp-remote" / "dist" / "proxy.js"
VERSION = "0.15.1"
MISSING = "mcp-remote is not installed: run `make test-deps` (npm ci --prefix tests/support/node)"
_AUTHORIZE = re.compile(r"Please authorize this client by visiting:\s*(\S+)")
PROTOCOL_VERSION = "2025-06-18"


def installed() -> bool:
    return node22() is not None and ENTRY.is_file()


class McpRemote:
    """One `mcp-remote URL CALLBACK_PORT` process; stop() ends it."""

    def __init__(self, url: str, *, callback_port: int, home: Path) -> None:
        node = node22()
        assert node is not None, MISSING
        home.mkdir(parents=True, exist_ok=True)
        opener = home / "browser.sh"
        opener.write_text(f'#!/bin/sh\necho "$1" >> "{home / "opened.txt"}"\n')
        opener.chmod(0o755)
        environ = {
            "PATH": f"{node.parent}:/usr/bin:/bin",
            "HOME": str(home),
            "MCP_REMOTE_CONFIG_DIR": str(home / "mcp-auth"),
            "BROWSER": str(opener),
        }
        self._log: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self._process = subprocess.Popen(
            [str(node), str(ENTRY), url, str(callback_port)],
            env=environ,
            cwd=home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self._lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            try:
                self._lines.put(json.loads(raw))
            except ValueError:
                continue  # not a JSON-RPC line

    def log(self) -> str:
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def authorization_url(self, timeout: float = 60) -> str:
        """The URL mcp-remote asks the person to open (blocks until it prints it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _AUTHORIZE.search(self.log())
            if found:
                return found.group(1)
            if self._process.poll() is not None:
                raise RuntimeError(f"mcp-remote exited:\n{self.log()}")
            time.sleep(0.1)
        raise TimeoutError(f"mcp-remote printed no authorization URL:\n{self.log()}")

    def send(self, message: dict[str, Any]) -> None:
        assert self._process.stdin is not None
        self._process.stdin.write((json.dumps(message) + "\n").encode())
        self._process.stdin.flush()

    def answer(self, request_id: int, timeout: float = 60) -> dict[str, Any]:
        """The response to request `request_id` (notifications and other replies are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to request {request_id} through mcp-remote:\n{self.log()}")
            try:
                message = self._lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if self._process.poll() is not None:
                    raise RuntimeError(f"mcp-remote exited:\n{self.log()}") from None
                continue
            if message.get("id") == request_id:
                return message

    def request(self, request_id: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        return self.answer(request_id)

    def initialize(self) -> dict[str, Any]:
        answer = self.request(
            1,
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "paywarden-tests", "version": "0"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                stream.close()
        self._log.close()

    def __enter__(self) -> McpRemote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
