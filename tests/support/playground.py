"""`make try`: a local playground where an agent really pays, with no real money.

It starts anvil, deploys TestUSDC, funds a demo wallet, serves an x402 seller with two priced
routes (one under the demo agent's approval threshold, one over it), sets the demo agent up with
`paywarden demo` and the admin commands a person would type, serves Paywarden on
http://localhost:PORT, and prints what to give an agent. Ctrl-C stops everything it started.

It lives with the test harness because it is made of it (the chain, the token and the seller the
end-to-end tests pay), and the seller needs the dev extras (the x402 SDK's FastAPI middleware).
Every run starts from nothing: a new chain, a new database in a temporary directory, removed on exit.

    python -m tests.support.playground [--port 8402]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from types import FrameType
from typing import Any

import httpx

from tests.support.chain import (
    Anvil,
    AnvilError,
    TestToken,
    deploy_test_usdc,
    fresh_wallet,
    terminate_with_parent,
)
from tests.support.seller import Seller, start_seller

NETWORK = "eip155:84532"
DEFAULT_PORT = 8402
# Prices in TestUSDC atomic units (6 decimals) around the demo agent's step-up threshold; both
# stay under its 0.10 USD per payment, so neither is refused outright.
THRESHOLD_USD = "0.05"
CHEAP_PATH, CHEAP_ATOMIC = "/quote", 10_000  # 0.01 USD: paid at once
HELD_PATH, HELD_ATOMIC = "/report", 80_000  # 0.08 USD: waits for a passkey
WALLET_ATOMIC = 10_000_000  # 10 TestUSDC
DEPLOYER, FACILITATOR = 0, 1  # anvil dev accounts: one mints, the other pays the seller's gas
WALLET_VARIABLE = "TRY_WALLET_KEY"  # only in the environment of `admin wallet import`
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
READY_LINE = "Ready"  # the first word of the line printed once everything answers


class PlaygroundError(RuntimeError):
    """Something the playground needs did not start; the message says what to do."""


def say(line: str = "") -> None:
    print(line, flush=True)  # flushed: the output may be a pipe (a test reads it line by line)


def usd(atomic: int) -> str:
    return f"{Decimal(atomic) / Decimal(1_000_000):.2f}"


def child_environ(extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of Paywarden's processes: none of the caller's PAYWARDEN_* variables, so a
    person's own configuration never points the playground at their database."""
    keep = {name: value for name, value in os.environ.items() if not name.startswith("PAYWARDEN_")}
    return {**keep, **extra}


def paywarden_command() -> str:
    return str(Path(sys.executable).with_name("paywarden"))


def check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            raise PlaygroundError(
                f"port {port} is in use (another Paywarden?): stop it, or run `make try TRY_PORT={port + 10}`"
            ) from None


@dataclass
class Playground:
    port: int
    workdir: Path
    anvil: Anvil
    token: TestToken
    seller: Seller
    wallet_address: str
    demo: dict[str, Any]

    @property
    def public_url(self) -> str:
        return f"http://localhost:{self.port}"


class Runner:
    """Runs `paywarden` commands against the playground's database, in its own directory (a
    `.env` where the person typed `make try` is not read). The admin commands run in this process
    (typer's runner), as the CLI tests do: each would otherwise load the same modules again, seconds
    apiece on a busy machine; `paywarden serve` is the installed command."""

    def __init__(self, workdir: Path, environ: dict[str, str]) -> None:
        self.workdir, self.environ = workdir, environ

    def json(self, *args: str, extra: Mapping[str, str] | None = None) -> dict[str, Any]:
        from typer.testing import CliRunner

        from server.cli import app

        # Only the playground's own PAYWARDEN_* variables: the caller's are unset for the command.
        unset: dict[str, str | None] = {name: None for name in os.environ if name.startswith("PAYWARDEN_")}
        playground_only = {
            name: value for name, value in self.environ.items() if name.startswith("PAYWARDEN_")
        }
        with contextlib.chdir(self.workdir):
            result = CliRunner().invoke(
                app,
                [*args, "--json"],
                env={**unset, **playground_only, **(extra or {})},
                catch_exceptions=False,
            )
        if result.exit_code != 0:
            raise PlaygroundError(f"`paywarden {' '.join(args)}` failed: {result.stderr.strip()}")
        answer: dict[str, Any] = json.loads(result.stdout)
        return answer

    def serve(self, port: int) -> subprocess.Popen[bytes]:
        # Its output joins the playground's stderr: a person sees the server's log as it pays.
        return subprocess.Popen(
            [paywarden_command(), "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=self.workdir,
            env=self.environ,
            stdin=subprocess.DEVNULL,
            stdout=sys.stderr,
            stderr=sys.stderr,
            preexec_fn=terminate_with_parent,
        )


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)


def wait_ready(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise PlaygroundError(
                    f"paywarden serve exited (code {process.returncode}): see its log above"
                )
            try:
                if client.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)  # bounded polling of a server that is starting
    raise PlaygroundError(f"paywarden serve did not answer on port {port} within {READY_TIMEOUT_S:.0f} s")


@contextmanager
def playground(port: int) -> Iterator[tuple[Playground, subprocess.Popen[bytes]]]:
    """Everything started, in order; stopped in reverse order on the way out, whatever happened."""
    check_port_free(port)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="paywarden-try-")))
        try:
            anvil = stack.enter_context(Anvil(die_with_parent=True))
        except AnvilError as error:
            raise PlaygroundError(f"{error} (`make try` installs it with npm)") from None
        token = deploy_test_usdc(anvil.w3, anvil.accounts[DEPLOYER].private_key)
        wallet_address, wallet_key = fresh_wallet()
        token.mint(wallet_address, WALLET_ATOMIC)
        pay_to, _ = fresh_wallet()
        seller = start_seller(
            rpc_url=anvil.rpc_url,
            token_address=token.address,
            pay_to=pay_to,
            facilitator_key=anvil.accounts[FACILITATOR].private_key,
            routes={CHEAP_PATH: CHEAP_ATOMIC, HELD_PATH: HELD_ATOMIC},
        )
        stack.callback(seller.stop)

        public_url = f"http://localhost:{port}"
        runner = Runner(
            workdir,
            child_environ(
                {
                    "PAYWARDEN_DATABASE_URL": f"sqlite:///{workdir / 'paywarden.db'}",
                    "PAYWARDEN_PUBLIC_URL": public_url,
                    # The seller is on 127.0.0.1: allowed for this server only.
                    "PAYWARDEN_ALLOW_PRIVATE_HOSTS": "1",
                    "PAYWARDEN_RPC_URLS": json.dumps({NETWORK: anvil.rpc_url}),
                    "PAYWARDEN_ASSETS": json.dumps({NETWORK: token.address}),
                    "PAYWARDEN_CONFIRMATIONS": json.dumps({NETWORK: 0}),  # anvil mines on demand
                    "PAYWARDEN_SETTLEMENT_WAIT_MS": "5000",  # a paid answer says "settled"
                }
            ),
        )
        demo = runner.json("demo")
        agent = demo["agentId"]
        runner.json("admin", "policy", "set", agent, "--allow-host", "127.0.0.1", "--step-up", THRESHOLD_USD)
        runner.json(
            "admin",
            "wallet",
            "import",
            agent,
            "--from-env",
            WALLET_VARIABLE,
            extra={WALLET_VARIABLE: wallet_key},
        )
        # The catalog pins the seller's payee, so the cheap route is not held as a new payee:
        # the one approval a person sees is the threshold's.
        runner.json(
            "admin", "catalog", "add", "--name", "Playground seller", "--host", "127.0.0.1",
            "--url", seller.url(CHEAP_PATH), "--price", usd(CHEAP_ATOMIC), "--network", NETWORK,
            "--category", "testing", "--pay-to", pay_to,
            "--summary", "The local seller of `make try`: TestUSDC on a local chain.",
        )  # fmt: skip

        server = runner.serve(port)
        stack.callback(stop_process, server)
        wait_ready(server, port)
        yield (
            Playground(
                port=port,
                workdir=workdir,
                anvil=anvil,
                token=token,
                seller=seller,
                wallet_address=wallet_address,
                demo=demo,
            ),
            server,
        )


def instructions(ground: Playground) -> list[str]:
    demo, seller = ground.demo, ground.seller
    url, token = demo["mcpUrl"], demo["token"]
    cheap, held = seller.url(CHEAP_PATH), seller.url(HELD_PATH)
    sign_up = (
        [
            f"  Sign up:      {demo['enrollUrl']}",
            "                (the demo owner's passkey; this run's database only)",
        ]
        if demo.get("enrollUrl")
        else []
    )
    return [
        "Paywarden playground: a local chain, TestUSDC and a local x402 seller. No real money.",
        f"  MCP URL:      {url}",
        f"  Agent token:  {token}",
        *sign_up,
        f"  Pages:        {demo['adminUrl']}",
        f"  Cheap route:  {cheap}  {usd(CHEAP_ATOMIC)} USD, under the {THRESHOLD_USD} USD threshold:"
        " paid at once",
        f"  Held route:   {held}  {usd(HELD_ATOMIC)} USD, over it: waits for your passkey",
        f"  Wallet:       {ground.wallet_address}  {usd(WALLET_ATOMIC)} TestUSDC",
        f"  Chain:        anvil {ground.anvil.rpc_url} (chain {ground.anvil.chain_id}),"
        f" TestUSDC {ground.token.address}",
        "",
        "1. Open the sign-up link and create a passkey.",
        "2. Connect an agent, by URL (it sends you to sign in) or with the token:",
        f'     claude mcp add --transport http paywarden {url} --header "Authorization: Bearer {token}"',
        f'3. Ask it: "With Paywarden\'s fetch_paid, get {cheap}": it pays 0.01 USD at once.',
        f'4. Ask it: "Now get {held}": it answers with an approval link. Open it, approve with',
        "   your passkey, and ask the agent to try again: it pays (a client with URL elicitation opens",
        "   the page itself and its call pays once you approve).",
    ]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    # Ctrl-C and SIGTERM end the playground alike, whatever the shell left as SIGINT's handler (a
    # background job's is "ignore"): everything it started is stopped on the way out.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make try", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="Paywarden's port (default 8402).")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    started = time.monotonic()
    try:
        with playground(args.port) as (ground, server):
            for line in instructions(ground):
                say(line)
            say()
            say(
                f"{READY_LINE} in {time.monotonic() - started:.1f} s."
                " Ctrl-C stops Paywarden, the seller and anvil."
            )
            code = server.wait()
            say(f"paywarden serve stopped (code {code}); stopping the playground.")
            return 1
    except KeyboardInterrupt:
        say("Stopped: Paywarden, the seller and anvil are gone, and this run's database with them.")
        return 0
    except PlaygroundError as error:
        print(f"make try: {error}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
