"""What benchmarks run against: real `paywarden serve` processes (so the server has its own
interpreter and GIL and is measured from outside, as a client would see it), and Coinbase's x402
SDK buyer for the bare exchange."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account import Account
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.exact import register_exact_evm_client

from server.settings import Settings
from tests.bench.harness import ROOT, infra_path
from tests.support.chain import free_port
from tests.support.paywarden import chain_environ, settings_for
from tests.support.processes import READY_TIMEOUT_S, ServeProcess, server_environ

# Four servers of two connections each at most stay well under PostgreSQL's max_connections while
# other runs share the database server; single servers keep the default pool.
POOL_SIZE_MANY = "4"
FLOOR_MODULE = "tests.bench.floor"
WARMUP_S = 3.0  # of every load test run: calls before it are not counted
NETWORK = "eip155:84532"


@dataclass(frozen=True)
class Served:
    public_url: str
    processes: list[ServeProcess]
    settings: Settings  # what tokens for these servers are issued against (audience: the public URL)

    @property
    def mcp_url(self) -> str:
        return self.processes[0].mcp_url


class FloorProcess(ServeProcess):
    """A server of the benchmarks' floor app (tests/bench/floor.py): Paywarden's tools and `floor`,
    in a process of its own like `paywarden serve`, one worker."""

    def start(self) -> None:
        assert self.workers == 1, "the floor app runs one worker"
        self._output = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        environ = {
            **self._environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-m", FLOOR_MODULE, "--host", "127.0.0.1", "--port", str(self.port)],
            cwd=self._workdir,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=self._output,
            stderr=subprocess.STDOUT,
        )


@contextmanager
def paywarden(
    database_url: str,
    workdir: Path,
    *,
    extra: Mapping[str, str] | None = None,
    count: int = 1,
    workers: int = 1,
    floor: bool = False,
) -> Iterator[Served]:
    """`count` servers of `workers` each; with `floor`, of the floor app (its `floor` tool too)."""
    extra = dict(extra or {})
    if count > 1:
        extra.setdefault("PAYWARDEN_DATABASE_POOL_SIZE", POOL_SIZE_MANY)
    workdir.mkdir(parents=True, exist_ok=True)
    ports = [free_port() for _ in range(count)]
    public_url = f"http://127.0.0.1:{ports[0]}"
    environ = server_environ(database_url=database_url, public_url=public_url, extra=extra)
    with ExitStack() as stack:
        processes = []
        for port in ports:
            kind = FloorProcess if floor else ServeProcess
            process = kind(port=port, environ=environ, workdir=workdir, workers=workers)
            stack.callback(process.stop)
            process.start()
            processes.append(process)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(process.ready() for process in processes):
            if time.monotonic() > deadline:
                raise RuntimeError(f"paywarden serve not ready in {READY_TIMEOUT_S} s")
            time.sleep(0.1)  # bounded polling of /readyz, not a wait for something to happen
        settings = settings_for(database_url=database_url, port=ports[0], extra=extra)
        yield Served(public_url, processes, settings)


def chain(anvil: Any, token_address: str, *, rpc_url: str | None = None) -> dict[str, str]:
    # Paywarden's defaults: a paid answer never waits on the chain (the tests' servers look once).
    environ = chain_environ(rpc_url=rpc_url or anvil.rpc_url, token_address=token_address)
    return {**environ, "PAYWARDEN_SETTLEMENT_WAIT_MS": "0"}


def fresh_block(anvil: Any) -> None:
    """Mine a block: anvil mines only on demand, and an authorisation is valid from a minute back."""
    anvil.w3.provider.make_request("evm_mine", [])


def sdk_client(private_key: str, token_address: str, *, timeout_s: float = 60) -> x402HttpxClient:
    """Coinbase's x402 SDK buyer: its httpx client, paying the test token (spend controls allow it:
    the SDK pays only the real USDC addresses it knows unless an asset is allowed explicitly)."""
    buyer = x402Client()
    register_exact_evm_client(buyer, EthAccountSigner(Account.from_key(private_key)), networks=NETWORK)
    buyer.set_spend_controls(
        {
            "allowed_assets": [
                {"network": NETWORK, "asset": token_address, "max_amount_per_payment": "1000000"}
            ]
        }
    )
    return x402HttpxClient(buyer, timeout=timeout_s)


def load(
    served: Served, token: str, *, sessions: int, seconds: float, calls: list[Any], client: str = "lean"
) -> dict[str, Any]:
    command = [
        sys.executable,
        str(infra_path("loadtest")),
        "--url",
        served.mcp_url,
        "--sessions",
        str(sessions),
        "--seconds",
        str(seconds),
        "--warmup",
        str(WARMUP_S),
        "--client",
        client,
    ]
    for call in calls:
        command += ["--call", call if isinstance(call, str) else json.dumps(call)]
    environ = {**os.environ, "PAYWARDEN_LOADTEST_TOKEN": token}
    finished = subprocess.run(
        command, env=environ, capture_output=True, text=True, timeout=seconds + WARMUP_S + 300, check=False
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    result: dict[str, Any] = json.loads(finished.stdout)
    return result
