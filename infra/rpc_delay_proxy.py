"""A JSON-RPC proxy that holds every request for a fixed time before passing it on: a chain node that
is far away, on loopback.

Paywarden's `PAYWARDEN_RPC_URLS` points at the proxy, which forwards each HTTP request to the real
node after `--delay-ms` (one delay per HTTP request: a batch travels as one round trip, as it would to
a remote node). It counts the JSON-RPC methods it forwards, so a benchmark can say how many calls a
payment makes and which.

    .venv/bin/python infra/rpc_delay_proxy.py --upstream http://127.0.0.1:8545 --delay-ms 100 --port 8546
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
from collections import Counter
from typing import Any

import httpx
import uvicorn

READY_TIMEOUT_S = 15.0


class DelayProxy:
    """The ASGI app: delay, forward, answer; counts methods on the way."""

    def __init__(self, upstream: str, delay_ms: float) -> None:
        self.upstream = upstream
        self.delay_s = delay_ms / 1000
        self._methods: Counter[str] = Counter()
        self._lock = threading.Lock()  # counted on the proxy's thread, read on the caller's
        self._client: httpx.AsyncClient | None = None

    def methods(self) -> dict[str, int]:
        with self._lock:
            return dict(self._methods)

    def reset(self) -> None:
        with self._lock:
            self._methods.clear()

    def _count(self, body: bytes) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            return
        calls = message if isinstance(message, list) else [message]
        with self._lock:
            for call in calls:
                if isinstance(call, dict):
                    self._methods[str(call.get("method", "?"))] += 1

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        self._count(body)
        await asyncio.sleep(self.delay_s)
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=30)
        answer = await self._client.post(
            self.upstream, content=body, headers={"content-type": "application/json"}
        )
        await send(
            {
                "type": "http.response.start",
                "status": answer.status_code,
                "headers": [
                    (b"content-type", answer.headers.get("content-type", "application/json").encode())
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer.content})


class RunningProxy:
    """The proxy served by uvicorn on a thread, on a socket bound before start-up."""

    def __init__(self, upstream: str, delay_ms: float, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = DelayProxy(upstream, delay_ms)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name=f"rpc-delay:{self.port}",
            daemon=True,
        )

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> RunningProxy:
        self._thread.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the RPC delay proxy did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()

    def __enter__(self) -> RunningProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="the real node's JSON-RPC URL")
    parser.add_argument("--delay-ms", type=float, default=100.0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8546)
    args = parser.parse_args()
    proxy = DelayProxy(args.upstream, args.delay_ms)
    uvicorn.run(proxy, host=args.host, port=args.port, log_level="warning", access_log=False, lifespan="off")


if __name__ == "__main__":
    main()
