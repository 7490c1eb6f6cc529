"""The real load balancer of infra/: HAProxy with infra/haproxy.cfg, started on loopback in front of
`paywarden serve` processes, exactly as compose runs it (the file takes its addresses from the
environment). Its runtime API socket says which process each request went to."""

from __future__ import annotations

import csv
import io
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.chain import free_port
from tests.support.plugin import require

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "infra" / "haproxy.cfg"
HAPROXY_MISSING = (
    "haproxy not installed: run `apt-get install haproxy` as root "
    "(or `make test-deps` as root, which does it)"
)
READY_TIMEOUT_S = 20.0


def haproxy_executable() -> str:
    found = shutil.which("haproxy") or next(
        (path for path in ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy") if Path(path).exists()), None
    )
    if found is None:
        require(HAPROXY_MISSING)
    return found


def environ_for(*, bind: str, replicas: list[str], socket_path: Path) -> dict[str, str]:
    assert len(replicas) == 2, "infra/haproxy.cfg names two replicas"
    return {
        **os.environ,
        "PROXY_BIND": bind,
        "REPLICA_1": replicas[0],
        "REPLICA_2": replicas[1],
        "PROXY_SOCKET": str(socket_path),
    }


class HAProxy:
    """`with HAProxy([base_url, base_url], workdir) as proxy:` then `proxy.url`."""

    def __init__(self, backends: list[str], workdir: Path) -> None:
        self.port = free_port()
        self.socket_path = workdir / "haproxy.sock"
        self._environ = environ_for(
            bind=f"127.0.0.1:{self.port}",
            replicas=[backend.removeprefix("http://") for backend in backends],
            socket_path=self.socket_path,
        )
        self._log = workdir / "haproxy.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self, *args: str) -> str:
        """One command of the runtime API (`show stat`, `show table paywarden`)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(self.socket_path))
            conn.sendall((" ".join(args) + "\n").encode())
            chunks = []
            while chunk := conn.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks).decode()

    def requests_per_replica(self) -> dict[str, int]:
        """Requests each replica has answered so far (HAProxy's `stot`, sessions per server)."""
        rows = csv.DictReader(io.StringIO(self.command("show", "stat").lstrip("# ")))
        return {
            row["svname"]: int(row["stot"])
            for row in rows
            if row["pxname"] == "paywarden" and row["svname"] not in {"FRONTEND", "BACKEND"}
        }

    def sessions(self) -> dict[str, str]:
        """The learned table: session id -> the replica that owns it."""
        text = self.command("show", "table", "paywarden")
        found: dict[str, str] = {}
        names = {"1": "replica1", "2": "replica2"}
        for line in text.splitlines():
            if " key=" not in line:
                continue
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            found[fields["key"]] = names.get(fields.get("server_id", ""), fields.get("server_id", "?"))
        return found

    def start(self) -> HAProxy:
        check = subprocess.run(
            [haproxy_executable(), "-c", "-f", str(CONFIG)],
            env=self._environ,
            capture_output=True,
            check=False,
        )
        assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
        log = self._log.open("wb")
        self._process = subprocess.Popen(
            [haproxy_executable(), "-W", "-db", "-f", str(CONFIG)],
            env=self._environ,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self._process.poll() is None, self._log.read_text(errors="replace")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"haproxy did not serve within {READY_TIMEOUT_S} s: {self._log.read_text()}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGUSR1)  # soft stop: finish what is in flight
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=10)

    def __enter__(self) -> HAProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
