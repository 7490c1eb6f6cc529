"""A small HTTP reverse proxy on loopback with session affinity on `Mcp-Session-Id`, as a load
balancer in front of several Paywarden processes must have.

A request carrying a session id goes to the backend whose answer created that session; any other
request goes to the next backend in turn, or to `pinned` when a test sets it (a person's browser
served by one process while an MCP session lives on another). The Host header is passed on, as a
load balancer in front of one public URL does, and every Set-Cookie of an answer is kept.
Responses are streamed (server-sent events included). `hits` counts what each backend received,
with and without a session; `requests` lists (backend, method, path) in order.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.support.chain import free_port

SESSION_HEADER = "mcp-session-id"
_HOP_BY_HOP = {"content-length", "connection", "keep-alive", "transfer-encoding", "upgrade"}


class AffinityProxy:
    def __init__(self, backends: list[str], *, port: int | None = None) -> None:
        self.backends = backends
        self.port = port or free_port()
        self.sessions: dict[str, str] = {}
        self.pinned: str | None = None  # where requests without a session go, when set
        self.hits: Counter[tuple[str, bool]] = Counter()  # (backend, with a session)
        self.requests: list[tuple[str, str, str]] = []  # (backend, method, path)
        self._turn = itertools.cycle(backends)
        self._http: httpx.AsyncClient | None = None
        app = Starlette(
            routes=[Route("/{path:path}", self._forward, methods=["GET", "POST", "DELETE"])],
            lifespan=self._lifespan,
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"affinity-{self.port}", daemon=True)

    @contextlib.asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(60, read=None))
        try:
            yield
        finally:
            await self._http.aclose()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def backend_of(self, session_id: str) -> str:
        return self.sessions[session_id]

    async def _forward(self, request: Request) -> Response:
        assert self._http is not None
        session = request.headers.get(SESSION_HEADER)
        backend = self.sessions.get(session) if session else None
        backend = backend or self.pinned or next(self._turn)
        self.hits[(backend, session is not None)] += 1
        self.requests.append((backend, request.method, request.url.path))
        headers = [(k, v) for k, v in request.headers.raw if k.decode("latin-1").lower() not in _HOP_BY_HOP]
        target = f"{backend}{request.url.path}" + (f"?{request.url.query}" if request.url.query else "")
        upstream = await self._http.send(
            self._http.build_request(request.method, target, headers=headers, content=await request.body()),
            stream=True,
        )
        created = upstream.headers.get(SESSION_HEADER)
        if created:
            self.sessions[created] = backend
        answer = StreamingResponse(
            upstream.aiter_raw(), status_code=upstream.status_code, background=BackgroundTask(upstream.aclose)
        )
        answer.raw_headers = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in upstream.headers.multi_items()
            if k.lower() not in _HOP_BY_HOP
        ]
        return answer

    def start(self) -> AffinityProxy:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the affinity proxy did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=15)

    def __enter__(self) -> AffinityProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
