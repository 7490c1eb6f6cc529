"""A local stand-in for a Slack incoming webhook: an HTTP server on 127.0.0.1 that keeps every
JSON body posted to it, and can be told to answer slowly or with an error."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookReceiver:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.status = 200
        self.delay_seconds = 0.0
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with receiver._lock:
                    receiver.messages.append(body)
                time.sleep(receiver.delay_seconds)
                answer = b"ok" if receiver.status == 200 else b"invalid_payload"
                try:
                    self.send_response(receiver.status)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)
                except OSError:
                    pass  # the client gave up waiting

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/services/T000/B000/test"

    @property
    def texts(self) -> list[str]:
        with self._lock:
            return [str(message.get("text")) for message in self.messages]

    def __enter__(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
