"""Real `paywarden serve` processes for tests that need several servers sharing one database.

Each process is the installed command with its own port and the same configuration (database,
public URL, master key), as a deployment behind a load balancer would run them. Output goes to
files, not pipes, so a chatty process can never block on a full pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO

import httpx

from tests.support.chain import free_port
from tests.support.paywarden import TEST_APPROVAL_POLL_MS, TEST_MASTER_KEY

READY_TIMEOUT_S = 60.0
STARTUP_COMPLETE = "Application startup complete"  # what uvicorn logs once a worker serves
STOP_TIMEOUT_S = 15.0


def paywarden_command() -> Path:
    return Path(sys.executable).parent / "paywarden"


class ServeProcess:
    def __init__(self, *, port: int, environ: Mapping[str, str], workdir: Path, workers: int = 1) -> None:
        self.port = port
        self.workers = workers
        self._environ = dict(environ)
        self._workdir = workdir
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> None:
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self._process = subprocess.Popen(
            [
                str(paywarden_command()),
                "serve",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ],
            cwd=self._workdir,
            env=self._environ,
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        if self._output is None:
            return ""
        self._output.seek(0)
        return self._output.read().decode("utf-8", "replace")

    def ready(self) -> bool:
        assert self._process is not None
        if self._process.poll() is not None:
            raise RuntimeError(f"paywarden serve on port {self.port} exited:\n{self.output()}")
        # With several workers, /readyz answers as soon as the first is up: wait for every one.
        if self.workers > 1 and self.output().count(STARTUP_COMPLETE) < self.workers:
            return False
        try:
            return httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def send_sigterm(self) -> None:
        """What a container runtime (or Kubernetes, on a rolling restart) sends to stop it."""
        assert self._process is not None
        self._process.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout: float) -> int:
        """Its exit code, once it exited (subprocess.TimeoutExpired past `timeout`)."""
        assert self._process is not None
        return self._process.wait(timeout=timeout)

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(timeout=STOP_TIMEOUT_S)
        if self._output is not None:
            self._output.close()
            self._output = None


def server_environ(*, database_url: str, public_url: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The servers' environment. Their background jobs are off unless `extra` turns them on: a job
    on the wall clock racing what a test writes makes the test depend on timing."""
    keep = {name: value for name, value in os.environ.items() if not name.upper().startswith("PAYWARDEN_")}
    return {
        **keep,
        "PAYWARDEN_DATABASE_URL": database_url,
        "PAYWARDEN_PUBLIC_URL": public_url,
        "PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY,
        "PAYWARDEN_ALLOW_PRIVATE_HOSTS": "1",
        "PAYWARDEN_BACKGROUND_JOBS": "0",
        "PAYWARDEN_APPROVAL_POLL_MS": TEST_APPROVAL_POLL_MS,
        **extra,
    }


@contextmanager
def serve_processes(
    count: int,
    *,
    database_url: str,
    extra: Mapping[str, str],
    workdir: Path,
    public_host: str = "127.0.0.1",
    public_url: str | None = None,
) -> Iterator[tuple[str, list[ServeProcess]]]:
    """`count` servers on their own ports, all with the public URL of the first (or `public_url`,
    a load balancer's in front of them all); yields that URL.

    Page tests pass `public_host="localhost"` (passkeys work on http://localhost only)."""
    ports = [free_port() for _ in range(count)]
    public_url = public_url or f"http://{public_host}:{ports[0]}"
    environ = server_environ(database_url=database_url, public_url=public_url, extra=extra)
    with ExitStack() as stack:
        processes = []
        for port in ports:
            process = ServeProcess(port=port, environ=environ, workdir=workdir)
            stack.callback(process.stop)
            process.start()
            processes.append(process)
        deadline = time.monotonic() + READY_TIMEOUT_S
        waiting = list(processes)
        while waiting:
            waiting = [process for process in waiting if not process.ready()]
            if waiting and time.monotonic() > deadline:
                raise RuntimeError(
                    f"{len(waiting)} paywarden serve process(es) not ready in {READY_TIMEOUT_S} s"
                )
            if waiting:
                time.sleep(0.1)  # bounded polling of /readyz, not a wait for something to happen
        yield public_url, processes
