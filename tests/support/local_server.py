"""Serve any ASGI app over real HTTP on a free loopback port, in a background thread.

For small apps a test builds itself (a page, a receiver). Paywarden itself runs through
tests/support/paywarden.py or, as separate processes, tests/support/processes.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

from tests.support.chain import held_port

START_TIMEOUT_S = 15.0


@contextmanager
def serve_asgi(app: ASGIApp, *, host: str = "127.0.0.1") -> Iterator[int]:
    """Run `app` until the block ends; yields the port. Browsers reach it as http://localhost:PORT."""
    sock = held_port(host)
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"asgi-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the test server on port {port} did not start")
        time.sleep(0.01)  # bounded: uvicorn has no start event to wait on
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
