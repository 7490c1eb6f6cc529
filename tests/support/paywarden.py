"""Run a real Paywarden server for tests, and talk to it with the official MCP client.

`RunningServer` serves `create_app(settings)` with uvicorn on a free loopback port in a thread:
the same app `paywarden serve` runs, over real HTTP. Tests that need several processes start
`paywarden serve` itself (see tests/support/processes.py).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from server.app import create_app
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.sellers.client import SellerClient
from server.services import Services, build_services
from server.settings import Settings, load_settings
from tests.support.chain import held_port

TEST_MASTER_KEY = MasterKey(b"\x07" * 32).encode()
TEST_APPROVAL_POLL_MS = "100"


def settings_for(
    *, database_url: str, port: int, extra: Mapping[str, str] | None = None, public_host: str = "127.0.0.1"
) -> Settings:
    """Settings for a test server on `port`. Page tests pass `public_host="localhost"`: browsers
    allow passkeys on http://localhost, never on http://127.0.0.1, and the RP id follows the host.

    Its background jobs are off: a job racing the wall clock against what a test just wrote makes
    the test flaky. Tests of a job run its `run_once` themselves, with the clock they choose; a
    test that wants them on passes PAYWARDEN_BACKGROUND_JOBS=1. A held payment's wait reads the
    database every 100 ms (a person's server: 2 s), so no test sleeps out a long poll."""
    environ = {
        "PAYWARDEN_DATABASE_URL": database_url,
        "PAYWARDEN_PUBLIC_URL": f"http://{public_host}:{port}",
        "PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY,
        "PAYWARDEN_ALLOW_PRIVATE_HOSTS": "1",
        "PAYWARDEN_BACKGROUND_JOBS": "0",
        "PAYWARDEN_APPROVAL_POLL_MS": TEST_APPROVAL_POLL_MS,
        **(extra or {}),
    }
    return load_settings(environ=environ)


def chain_environ(
    *, rpc_url: str, token_address: str, network: str = "eip155:84532", confirmations: int = 0
) -> dict[str, str]:
    """A chain for a test server. A transfer settles in the block that holds it unless the test asks
    for more confirmations: anvil mines a block only when asked to. A paid answer waits for its one
    look at the chain when the seller named the transaction, so a test reads the chain's word in
    it; tests of the default (answer `pending`, settle in the background) set the wait to 0."""
    return {
        "PAYWARDEN_RPC_URLS": json.dumps({network: rpc_url}),
        "PAYWARDEN_ASSETS": json.dumps({network: token_address}),
        "PAYWARDEN_CONFIRMATIONS": json.dumps({network: confirmations}),
        "PAYWARDEN_SETTLEMENT_WAIT_MS": "5000",
    }


class RunningServer:
    def __init__(
        self,
        settings: Settings,
        *,
        port: int,
        clock: Clock | None = None,
        services: Services | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        """`sock`: a socket already bound to `port` (held_port()) for the server to listen on."""
        self.settings = settings
        self.port = port
        self.services = services or build_services(settings, clock=clock)
        config = uvicorn.Config(
            create_app(settings, services=self.services),
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="on",
        )
        self._server = uvicorn.Server(config)
        sockets = [sock] if sock is not None else None
        self._thread = threading.Thread(
            target=lambda: self._server.run(sockets=sockets), name=f"paywarden-{port}", daemon=True
        )

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def clock(self) -> Clock:
        return self.services.clock

    @property
    def public_url(self) -> str:
        """What a browser loads: the configured public URL (http://localhost:PORT for page tests)."""
        return self.settings.public_url

    def start(self) -> RunningServer:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the Paywarden test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)

    def __enter__(self) -> RunningServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    database_url: str,
    *,
    extra: Mapping[str, str] | None = None,
    clock: Clock | None = None,
    public_host: str = "127.0.0.1",
    document_http: SellerClient | None = None,
) -> RunningServer:
    """A server for `database_url`. `document_http` replaces the client that fetches client
    metadata documents (one that trusts a test certificate authority, say)."""
    sock = held_port()
    port = int(sock.getsockname()[1])
    settings = settings_for(database_url=database_url, port=port, extra=extra, public_host=public_host)
    services = build_services(settings, clock=clock, document_http=document_http)
    return RunningServer(settings, port=port, clock=clock, services=services, sock=sock)


@asynccontextmanager
async def mcp_client(url: str, token: str, *, mode: str = "auto") -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


def error_of(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error, f"expected a tool error, got {result.structured_content}"
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert isinstance(error, dict)
    return error


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, f"unexpected tool error: {result.structured_content}"
    assert result.structured_content is not None
    return dict(result.structured_content)
