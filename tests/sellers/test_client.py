"""The seller client's exchange rules: one request, bounded in time and size, and an honest account
of whether a request left ("never sent", "answer lost", "body incomplete")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import anyio
import pytest

from server.sellers.client import BODY_BROKEN, BODY_TIMED_OUT, SellerClient, SellerRequest
from server.sellers.errors import ResponseLost, SellerTimeout, SellerUnreachable
from tests.support.chain import free_port
from tests.support.hostile_seller import Exchange, ScriptedServer

pytestmark = pytest.mark.anyio

CAP = 64 * 1024
STREAM_BYTES = 50 * 1024 * 1024


class Seen:
    def __init__(self) -> None:
        self.requests: list[Exchange] = []
        self.streamed = 0


SEEN = Seen()


async def handler(ex: Exchange) -> None:
    SEEN.requests.append(ex)
    if ex.scenario == "huge":
        await ex.head(200, {"Content-Type": "application/octet-stream", "Content-Length": str(STREAM_BYTES)})
        chunk = b"x" * 65536
        while SEEN.streamed < STREAM_BYTES:
            await ex.write(chunk)
            SEEN.streamed += len(chunk)
    elif ex.scenario == "stall-head":
        for _ in range(100):
            await ex.write(b"H")
            await asyncio.sleep(0.05)
    elif ex.scenario == "stall-body":
        await ex.head(200, {"Content-Type": "text/plain", "Content-Length": "100"})
        for _ in range(100):
            await ex.write(b"b")
            await asyncio.sleep(0.05)
    elif ex.scenario == "partial":
        await ex.head(200, {"Content-Type": "text/plain", "Content-Length": "100"})
        await ex.write(b"short")
    elif ex.scenario == "drop":
        ex.abort()
    elif ex.scenario == "redirect":
        await ex.respond(302, b"", Location="/echo/after")
    else:
        await ex.respond(200, b"echo", content_type="text/plain", X_Seller="yes")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    running = ScriptedServer(handler).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client() -> SellerClient:
    return SellerClient(max_response_bytes=CAP, allow_private_hosts=True)


def url(server: ScriptedServer, path: str) -> str:
    return f"http://127.0.0.1:{server.port}{path}"


def soon(seconds: float = 5.0) -> float:
    return anyio.current_time() + seconds


async def test_a_huge_body_is_cut_at_the_cap_without_being_read_to_the_end(
    server: ScriptedServer, client: SellerClient
) -> None:
    SEEN.streamed = 0
    response = await client.fetch(SellerRequest("GET", url(server, "/huge/1")), deadline=soon())
    assert response.status == 200
    assert response.truncated is True
    assert len(response.body) == CAP
    assert response.body_error is None
    # The seller stops as soon as the connection closes: far from 50 MB went out.
    deadline = time.monotonic() + 5
    before = -1
    while SEEN.streamed != before and time.monotonic() < deadline:
        before = SEEN.streamed
        await anyio.sleep(0.2)
    assert SEEN.streamed < STREAM_BYTES // 4


async def test_our_headers_replace_encoding_and_agent(server: ScriptedServer, client: SellerClient) -> None:
    SEEN.requests.clear()
    request = SellerRequest("POST", url(server, "/echo/1"), {"Accept-Encoding": "gzip", "X-Mine": "1"}, b"{}")
    response = await client.fetch(request, deadline=soon())
    assert response.body == b"echo"
    assert response.headers["x-seller"] == "yes"
    seen = SEEN.requests[-1]
    assert seen.method == "POST"
    assert seen.body == b"{}"
    assert seen.headers["accept-encoding"] == "identity"
    assert seen.headers["x-mine"] == "1"
    assert seen.headers["user-agent"].startswith("Paywarden/")


async def test_a_same_origin_redirect_keeps_the_agents_headers(
    server: ScriptedServer, client: SellerClient
) -> None:
    SEEN.requests.clear()
    response = await client.fetch(
        SellerRequest("GET", url(server, "/redirect/1"), {"X-Mine": "2"}), deadline=soon()
    )
    assert response.status == 200
    assert [ex.path for ex in SEEN.requests] == ["/redirect/1", "/echo/after"]
    assert SEEN.requests[-1].headers["x-mine"] == "2"


async def test_send_never_follows_a_redirect(server: ScriptedServer, client: SellerClient) -> None:
    SEEN.requests.clear()
    response = await client.send(SellerRequest("GET", url(server, "/redirect/1")), deadline=soon())
    assert response.status == 302
    assert [ex.path for ex in SEEN.requests] == ["/redirect/1"]


async def test_a_stalled_answer_before_payment_is_a_timeout(
    server: ScriptedServer, client: SellerClient
) -> None:
    started = anyio.current_time()
    with pytest.raises(SellerTimeout):
        await client.fetch(SellerRequest("GET", url(server, "/stall-head/1")), deadline=soon(1.0))
    assert anyio.current_time() - started < 3


async def test_a_stalled_answer_after_payment_is_lost_not_timed_out(
    server: ScriptedServer, client: SellerClient
) -> None:
    with pytest.raises(ResponseLost):
        await client.send(
            SellerRequest("GET", url(server, "/stall-head/2")), deadline=soon(1.0), after_payment=True
        )


async def test_a_dropped_connection_after_payment_is_lost(
    server: ScriptedServer, client: SellerClient
) -> None:
    with pytest.raises(ResponseLost):
        await client.send(SellerRequest("GET", url(server, "/drop/1")), deadline=soon(), after_payment=True)
    with pytest.raises(SellerUnreachable):
        await client.send(SellerRequest("GET", url(server, "/drop/2")), deadline=soon())


async def test_nothing_listening_means_nothing_was_sent(client: SellerClient) -> None:
    closed = f"http://127.0.0.1:{free_port()}/x"
    with pytest.raises(SellerUnreachable):
        await client.send(SellerRequest("GET", closed), deadline=soon(), after_payment=True)


async def test_a_body_that_stalls_after_the_head_is_reported_not_lost(
    server: ScriptedServer, client: SellerClient
) -> None:
    response = await client.send(
        SellerRequest("GET", url(server, "/stall-body/1")), deadline=soon(1.0), after_payment=True
    )
    assert response.status == 200
    assert response.body_error == BODY_TIMED_OUT
    assert response.truncated is True
    assert 0 < len(response.body) < 100
    # Before payment an incomplete body is worth nothing: it is a failure.
    with pytest.raises(SellerTimeout):
        await client.fetch(SellerRequest("GET", url(server, "/stall-body/2")), deadline=soon(1.0))


async def test_a_body_cut_short_is_reported(server: ScriptedServer, client: SellerClient) -> None:
    response = await client.send(
        SellerRequest("GET", url(server, "/partial/1")), deadline=soon(), after_payment=True
    )
    assert response.status == 200
    assert response.body_error == BODY_BROKEN
    assert response.body == b"short"
    with pytest.raises(SellerUnreachable):
        await client.fetch(SellerRequest("GET", url(server, "/partial/2")), deadline=soon())


async def test_a_deadline_already_passed_sends_nothing(server: ScriptedServer, client: SellerClient) -> None:
    SEEN.requests.clear()
    with pytest.raises(SellerTimeout):
        await client.send(SellerRequest("GET", url(server, "/echo/late")), deadline=anyio.current_time() - 1)
    assert SEEN.requests == []
