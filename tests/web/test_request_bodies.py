"""No request body is held in memory before its size is known: a real `paywarden serve` process
is sent 100 MiB on every endpoint that reads a body (chunked with no length, with an honest large
`Content-Length`, and with a lying small one) and its resident memory must not follow, and it must
still answer afterwards."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from auth.sessions import SESSION_COOKIE
from server.kit.clock import Clock, SystemClock
from server.kit.db import Database
from server.settings import Settings
from tests.support.oauth import enrolled_person
from tests.support.paywarden import serve, settings_for
from tests.support.processes import ServeProcess, serve_processes
from tests.support.tenants import make_agent

MIB = 1024 * 1024
STREAMED_BYTES = 100 * MIB
ALLOWED_GROWTH = 20 * MIB
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Endpoint:
    path: str
    content_type: str
    bearer: bool = False
    signed_in: bool = False


@dataclass(frozen=True)
class Deployment:
    """What the test helpers need of a server: its settings and the URL people use."""

    settings: Settings
    public_url: str
    clock: Clock = field(default_factory=SystemClock)


@dataclass(frozen=True)
class Callers:
    """Who sends the bodies: an agent (its bearer token) and a signed-in member (their cookie)."""

    token: str
    cookie: str


ENDPOINTS = [
    Endpoint("/login/options", JSON),
    Endpoint("/login/verify", JSON),
    Endpoint("/enroll/pw_en_not-a-real-link/options", JSON),
    Endpoint("/oauth/register", JSON),
    Endpoint("/oauth/token", FORM),
    Endpoint("/oauth/revoke", FORM),
    Endpoint("/oauth/introspect", FORM),
    Endpoint("/mcp", JSON, bearer=True),
    # Signed-in pages: their forms and passkey posts are read only for a member.
    Endpoint("/account/passkeys/options", JSON, signed_in=True),
    Endpoint("/account/passkeys/pk_unknown/rename", FORM, signed_in=True),
    Endpoint("/connections/gr_unknown/revoke", FORM, signed_in=True),
    Endpoint("/admin/settings/ttl", FORM, signed_in=True),
    Endpoint("/admin/settings/slack", FORM, signed_in=True),
    Endpoint("/admin/members/invite", FORM, signed_in=True),
    Endpoint("/oauth/authorize", FORM, signed_in=True),
    Endpoint("/logout", FORM, signed_in=True),
]


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class PeakMemory:
    """The highest resident size of a process while the block runs, sampled every few ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = resident_bytes(pid)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, resident_bytes(self.pid))

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)
        self.peak = max(self.peak, resident_bytes(self.pid))


def stream(base_url: str, endpoint: Endpoint, *, callers: Callers, mode: str) -> bytes:
    """POST STREAMED_BYTES to `endpoint`; returns what the server answered (maybe nothing, when it
    closed the connection first). The answer is read while the body is still being sent."""
    url = urlsplit(base_url)
    assert url.port is not None
    headers = [
        f"POST {endpoint.path} HTTP/1.1",
        f"Host: localhost:{url.port}",  # the pages' host: pages elsewhere only redirect
        f"Content-Type: {endpoint.content_type}",
        "Accept: application/json, text/event-stream",
    ]
    if endpoint.bearer:
        headers.append(f"Authorization: Bearer {callers.token}")
    if endpoint.signed_in:
        headers.append(f"Cookie: {callers.cookie}")
    if mode == "chunked":
        headers.append("Transfer-Encoding: chunked")
    elif mode == "declared":
        headers.append(f"Content-Length: {STREAMED_BYTES}")
    else:
        headers.append("Content-Length: 100")
    sock = socket.create_connection(("127.0.0.1", url.port), timeout=60)
    answer = bytearray()

    def read() -> None:
        try:
            while chunk := sock.recv(65536):
                answer.extend(chunk)
        except OSError:
            pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    prefix = b"x=" if endpoint.content_type == FORM else b""
    piece = prefix + b"a" * (MIB - len(prefix))
    try:
        sock.sendall(("\r\n".join(headers) + "\r\n\r\n").encode())
        for _ in range(STREAMED_BYTES // MIB):
            if mode == "chunked":
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            else:
                sock.sendall(piece)
            piece = b"a" * MIB
        if mode == "chunked":
            sock.sendall(b"0\r\n\r\n")
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the server stopped reading and closed the connection: what it should do
    reader.join(timeout=60)
    sock.close()
    return bytes(answer)


@pytest.fixture
def server(sqlite_db: Database, tmp_path: Path) -> Iterator[tuple[ServeProcess, Callers]]:
    with serve_processes(
        1, database_url=sqlite_db.url, extra={}, workdir=tmp_path, public_host="localhost"
    ) as (public_url, processes):
        port = int(public_url.rsplit(":", 1)[1])
        settings = settings_for(database_url=sqlite_db.url, port=port, public_host="localhost")
        agent = make_agent(sqlite_db, settings, allow_hosts=["seller.example"])
        person = enrolled_person(Deployment(settings, public_url), sqlite_db)
        cookie = f"{SESSION_COOKIE}={person.browser.http.cookies[SESSION_COOKIE]}"
        person.browser.close()
        yield processes[0], Callers(agent.token, cookie)


def normal_requests_work(base_url: str) -> None:
    registered = httpx.post(
        f"{base_url}/oauth/register",
        json={"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"},
        timeout=15,
    )
    assert registered.status_code == 201, registered.text
    assert httpx.get(f"{base_url}/readyz", timeout=15).status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["chunked", "declared", "lying"])
def test_a_huge_body_is_refused_without_being_held(server: tuple[ServeProcess, Callers], mode: str) -> None:
    process, callers = server
    # Once each, small, so what a first request loads (templates, the SDK's session) is not counted.
    for endpoint in ENDPOINTS:
        headers = {"Content-Type": endpoint.content_type, "Accept": "application/json, text/event-stream"}
        if endpoint.bearer:
            headers["Authorization"] = f"Bearer {callers.token}"
        if endpoint.signed_in:
            headers["Cookie"] = callers.cookie
        headers["Host"] = f"localhost:{process.port}"
        httpx.post(f"{process.base_url}{endpoint.path}", content=b"{}", headers=headers, timeout=15)
    normal_requests_work(process.base_url)
    grown: dict[str, int] = {}
    statuses: dict[str, bytes] = {}
    for endpoint in ENDPOINTS:
        before = resident_bytes(process.pid)
        with PeakMemory(process.pid) as memory:
            answer = stream(process.base_url, endpoint, callers=callers, mode=mode)
        grown[endpoint.path] = memory.peak - before
        statuses[endpoint.path] = answer.split(b"\r\n", 1)[0]
    too_much = {path: f"{size / MIB:.0f} MiB" for path, size in grown.items() if size >= ALLOWED_GROWTH}
    assert not too_much, f"resident memory grew by {too_much}; answers: {statuses}"
    if mode != "lying":
        refused = {path: line for path, line in statuses.items() if not line.startswith(b"HTTP/1.1 413")}
        assert not refused, f"not refused with 413: {refused}"
    normal_requests_work(process.base_url)


OVER_THE_LIMIT = b"{" + b" " * (64 * 1024) + b"}"


def test_an_oversized_body_gets_a_stable_code_and_a_sentence(sqlite_db: Database) -> None:
    with serve(sqlite_db.url, public_host="localhost") as running:
        page_host = {"Host": f"localhost:{running.port}", "Content-Type": JSON}
        registered = httpx.post(
            f"{running.base_url}/oauth/register", content=OVER_THE_LIMIT, headers={"Content-Type": JSON}
        )
        signing_in = httpx.post(
            f"{running.base_url}/login/options", content=OVER_THE_LIMIT, headers=page_host
        )
        as_a_page = httpx.post(
            f"{running.base_url}/oauth/token",
            content=b"grant_type=" + b"a" * (64 * 1024),
            headers={"Content-Type": FORM, "Accept": "text/html"},
        )
    assert registered.status_code == 413
    assert registered.json()["error"] == "request_too_large"
    assert registered.headers["connection"] == "close"
    assert signing_in.status_code == 413
    assert signing_in.json()["error"] == "request_too_large"
    assert as_a_page.status_code == 413
    assert "This request is too large for Paywarden to read." in as_a_page.text


def test_the_sign_in_rate_limit_is_counted_before_the_body_is_read(sqlite_db: Database) -> None:
    with serve(
        sqlite_db.url, public_host="localhost", extra={"PAYWARDEN_RATE_LIMIT_SIGN_IN": "2"}
    ) as running:
        headers = {"Host": f"localhost:{running.port}", "Content-Type": JSON}
        codes = [
            httpx.post(
                f"{running.base_url}/login/options", content=OVER_THE_LIMIT, headers=headers
            ).status_code
            for _ in range(3)
        ]
    assert codes == [413, 413, 429]
