"""A local chain for tests: an anvil process, its dev accounts and our TestUSDC token.

anvil comes from npm (`make test-deps`); the token is the compiled artifact in
`contracts/TestUSDC.json`, so no compiler is needed here. Everything talks to anvil over
loopback HTTP with real signed transactions, as a facilitator would on a real chain.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx
from eth_account import Account
from web3 import Web3
from web3.contract import Contract

HERE = Path(__file__).resolve().parent
NPM_ANVIL = HERE / "node" / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"
TEST_USDC_ARTIFACT = HERE / "contracts" / "TestUSDC.json"

# Base Sepolia's chain id: the network x402 examples use ("eip155:84532").
CHAIN_ID = 84532

# The first ten accounts of anvil's default mnemonic
# "test test test test test test test test test test test junk" (m/44'/60'/0'/0/i).
# They are public knowledge and hold 10 000 ETH each on every fresh anvil.
DEV_PRIVATE_KEYS: tuple[str, ...] = (
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
    "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
    "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
    "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    "0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a",
    "0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba",
    "0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e",
    "0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356",
    "0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97",
    "0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6",
)

READY_TIMEOUT_S = 15.0
PR_SET_PDEATHSIG = 1  # prctl(2)
RECEIPT_TIMEOUT_S = 15.0


def anvil_binary() -> Path | None:
    """Where anvil is: $PAYWARDEN_ANVIL_BIN, else the npm copy, else the PATH; None if nowhere."""
    override = os.environ.get("PAYWARDEN_ANVIL_BIN")
    if override:
        return Path(override)
    if NPM_ANVIL.is_file() and os.access(NPM_ANVIL, os.X_OK):
        return NPM_ANVIL
    found = shutil.which("anvil")
    return Path(found) if found else None


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (callers retry if they lose the race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def held_port(host: str = "127.0.0.1") -> socket.socket:
    """A socket bound to a free port of `host` and kept open, for an in-process server to listen
    on: unlike free_port()'s, nothing else can bind the port before the server listens."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


def terminate_with_parent() -> None:
    """In a child between fork and exec: ask Linux to send it SIGTERM when its parent dies."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def private_key_hex(key: bytes) -> str:
    # hexbytes 2 dropped the 0x from .hex(); every consumer here wants it.
    return "0x" + bytes(key).hex()


def fresh_wallet() -> tuple[str, str]:
    """A new random account: (checksummed address, 0x-prefixed private key)."""
    account = Account.create()
    return account.address, private_key_hex(account.key)


@dataclass(frozen=True)
class DevAccount:
    address: str
    private_key: str


DEV_ACCOUNTS: tuple[DevAccount, ...] = tuple(
    DevAccount(Account.from_key(key).address, key) for key in DEV_PRIVATE_KEYS
)


class AnvilError(RuntimeError):
    """anvil could not be started or did not answer."""


@dataclass
class Anvil:
    """An anvil node on 127.0.0.1 with automining, started on a free port.

    Use as a context manager, or call start() and stop().
    """

    binary: Path | None = None
    chain_id: int = CHAIN_ID
    accounts: tuple[DevAccount, ...] = DEV_ACCOUNTS
    port: int = 0
    # Linux: anvil gets SIGTERM when the process that started it dies, even by SIGKILL (the
    # playground sets it, so no anvil outlives it; a test session has no need for it).
    die_with_parent: bool = False
    _process: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _stderr: IO[bytes] | None = field(default=None, init=False, repr=False)
    _w3: Web3 | None = field(default=None, init=False, repr=False)

    @property
    def rpc_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def w3(self) -> Web3:
        if self._w3 is None:
            raise AnvilError("anvil is not running")
        return self._w3

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> Self:
        binary = self.binary or anvil_binary()
        if binary is None:
            raise AnvilError("anvil not found: run `make test-deps` or set PAYWARDEN_ANVIL_BIN")
        # The port is picked before anvil binds it, so another process can take it in between:
        # try a few ports rather than fail the session on that race.
        last_error: AnvilError | None = None
        for _ in range(3):
            self.port = free_port()
            try:
                self._spawn(binary)
                self._wait_ready()
            except AnvilError as error:
                last_error = error
                self.stop()
                continue
            self._w3 = Web3(Web3.HTTPProvider(self.rpc_url, request_kwargs={"timeout": 10}))
            return self
        raise last_error or AnvilError("anvil did not start")

    def _spawn(self, binary: Path) -> None:
        # stderr goes to a file, not a pipe: a pipe nobody reads could fill and stall anvil.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 (closed in stop())
        self._process = subprocess.Popen(
            [
                str(binary),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--chain-id",
                str(self.chain_id),
                "--silent",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            preexec_fn=terminate_with_parent if self.die_with_parent else None,
        )

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace").strip()

    def _wait_ready(self) -> None:
        request = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        deadline = time.monotonic() + READY_TIMEOUT_S
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if self._process is None or self._process.poll() is not None:
                    raise AnvilError(f"anvil exited during start-up: {self._stderr_text()}")
                try:
                    answer = client.post(self.rpc_url, json=request).json()
                except (httpx.TransportError, ValueError):
                    time.sleep(0.01)
                    continue
                if int(answer["result"], 16) != self.chain_id:
                    raise AnvilError(f"port {self.port} answers chain {answer['result']}, not anvil's")
                return
        raise AnvilError(f"anvil did not answer on {self.rpc_url} within {READY_TIMEOUT_S} s")

    def stop(self) -> None:
        process, self._process, self._w3 = self._process, None, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def send_transaction(w3: Web3, private_key: str, tx: dict[str, Any]) -> dict[str, Any]:
    """Sign `tx` with `private_key`, send it raw and wait for its receipt; raise if it reverted.

    Gas, fees and nonce are filled in from the node. Concurrent senders from one key must
    serialise themselves (TestToken does, with a lock).
    """
    sender = Account.from_key(private_key).address
    tx = {
        "from": sender,
        "chainId": w3.eth.chain_id,
        "nonce": w3.eth.get_transaction_count(sender, "pending"),
        **tx,
    }
    if "gas" not in tx:
        tx["gas"] = w3.eth.estimate_gas(tx)  # type: ignore[arg-type]
    if "maxFeePerGas" not in tx:
        base_fee = int(w3.eth.get_block("latest")["baseFeePerGas"])
        tx["maxPriorityFeePerGas"] = w3.eth.max_priority_fee
        tx["maxFeePerGas"] = 2 * base_fee + tx["maxPriorityFeePerGas"]
    signed = Account.sign_transaction(tx, private_key)
    tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    receipt = dict(w3.eth.wait_for_transaction_receipt(tx_hash, timeout=RECEIPT_TIMEOUT_S, poll_latency=0.01))
    if receipt["status"] != 1:
        raise RuntimeError(f"transaction {tx_hash.to_0x_hex()} reverted")
    return receipt


def load_test_usdc_artifact() -> dict[str, Any]:
    artifact: dict[str, Any] = json.loads(TEST_USDC_ARTIFACT.read_text(encoding="utf-8"))
    return artifact


@dataclass
class TestToken:
    """A deployed TestUSDC, driven from the key that deployed it."""

    __test__ = False  # not a pytest test class, despite the name

    contract: Contract
    sender_key: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def address(self) -> str:
        return str(self.contract.address)

    @property
    def w3(self) -> Web3:
        return self.contract.w3

    def mint(self, to: str, amount_atomic: int) -> None:
        data = self.contract.encode_abi("mint", [Web3.to_checksum_address(to), amount_atomic])
        # One key, one nonce sequence: tests in threads must not race for the same nonce.
        with self._lock:
            send_transaction(self.w3, self.sender_key, {"to": self.contract.address, "data": data})

    def balance_of(self, address: str) -> int:
        return int(self.contract.functions.balanceOf(Web3.to_checksum_address(address)).call())

    def authorization_state(self, authorizer: str, nonce: bytes | str) -> bool:
        nonce_bytes = bytes.fromhex(nonce.removeprefix("0x")) if isinstance(nonce, str) else nonce
        state = self.contract.functions.authorizationState(Web3.to_checksum_address(authorizer), nonce_bytes)
        return bool(state.call())


def deploy_test_usdc(w3: Web3, deployer_key: str) -> TestToken:
    """Deploy a fresh TestUSDC from `deployer_key` with a raw signed transaction."""
    artifact = load_test_usdc_artifact()
    receipt = send_transaction(w3, deployer_key, {"data": artifact["bytecode"]})
    address = receipt["contractAddress"]
    if address is None:
        raise RuntimeError("TestUSDC deployment produced no contract address")
    contract = w3.eth.contract(address=address, abi=artifact["abi"])
    return TestToken(contract=contract, sender_key=deployer_key)
