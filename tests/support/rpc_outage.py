"""A JSON-RPC node that is down for some calls: a proxy on loopback that passes every request to the
real node except those calling one of `down_for`, which it answers as a node that cannot be
reached does (HTTP 503, no JSON-RPC answer), without passing them on."""

from __future__ import annotations

import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self

import httpx


class RpcOutage:
    def __init__(self, upstream: str, *, down_for: frozenset[str]) -> None:
        self.upstream = upstream
        self.down_for = down_for
        self.refused: Counter[str] = Counter()
        outage = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # the JSON-RPC verb
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                calls = json.loads(body)
                calls = calls if isinstance(calls, list) else [calls]
                methods = {str(call.get("method")) for call in calls}
                if methods & outage.down_for:
                    outage.refused.update(methods & outage.down_for)
                    self.send_response(503)
                    self.end_headers()
                    return
                json_body = {"content-type": "application/json"}
                answer = httpx.post(outage.upstream, content=body, headers=json_body)
                self.send_response(answer.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="rpc-outage", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
