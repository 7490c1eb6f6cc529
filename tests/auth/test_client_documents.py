"""Client ID metadata documents: a client_id that is an https URL is fetched through the guarded
seller client (real TLS against a test certificate authority), must name itself, bounds the
redirect URIs, is cached as HTTP caching allows, and is never fetched from a private address."""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from sqlmodel import select

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import ClientDocumentFailure
from server.sellers.client import SellerClient
from tests.support.hostile_seller import Exchange, ScriptedServer
from tests.support.oauth import (
    CALLBACK,
    SoftBrowser,
    authorization_params,
    code_of,
    enrollment_link_token,
    exchange,
    pkce,
)
from tests.support.paywarden import RunningServer, serve
from tests.support.socket_guard import ScriptedResolver
from tests.support.tenants import make_agent, make_member
from tests.support.tls import TestAuthority

HOST = "client.example"


def _text(page: httpx.Response) -> str:
    return html.unescape(page.text)


PREFIX = "Paywarden could not use this application's client metadata document."


@dataclass
class DocumentHost:
    """An https host serving metadata documents, recording what it was asked."""

    server: ScriptedServer
    documents: dict[str, tuple[bytes, dict[str, str], int]] = field(default_factory=dict)
    requests: list[dict[str, str]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"https://{HOST}:{self.server.port}{path}"

    def publish(
        self,
        path: str,
        document: dict[str, Any] | bytes,
        *,
        status: int = 200,
        headers: dict[str, str] | None = None,
    ) -> str:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.documents[path] = (body, headers or {}, status)
        return self.url(path)

    def asked(self, path: str) -> list[dict[str, str]]:
        return [request for request in self.requests if request["path"] == path]


@pytest.fixture
def authority() -> TestAuthority:
    return TestAuthority.create()


@pytest.fixture
def host(authority: TestAuthority) -> Iterator[DocumentHost]:
    holder: list[DocumentHost] = []

    async def handle(exchange: Exchange) -> None:
        found = holder[0]
        found.requests.append({"path": exchange.path, **exchange.headers})
        body, headers, status = found.documents.get(exchange.path, (b"{}", {}, 404))
        etag = headers.get("ETag")
        if etag and exchange.headers.get("if-none-match") == etag:
            await exchange.respond(304, b"", **headers)
            return
        await exchange.respond(status, body, **headers)

    scripted = ScriptedServer(handle, ssl_context=authority.server_context(HOST)).start()
    holder.append(DocumentHost(scripted))
    yield holder[0]
    scripted.stop()


def _fetcher(
    authority: TestAuthority, *, answers: dict[str, list[list[str]]], allow_private: bool
) -> SellerClient:
    return SellerClient(
        max_response_bytes=16 * 1024 + 1,
        allow_private_hosts=allow_private,
        resolver=ScriptedResolver(answers),
        ssl_context=authority.client_context(),
    )


@pytest.fixture
def cimd_server(sqlite_db: Database, clock: FrozenClock, authority: TestAuthority) -> Iterator[RunningServer]:
    fetcher = _fetcher(authority, answers={HOST: [["127.0.0.1"]]}, allow_private=True)
    with serve(sqlite_db.url, public_host="localhost", clock=clock, document_http=fetcher) as running:
        yield running


@pytest.fixture
def browser(cimd_server: RunningServer, sqlite_db: Database) -> Iterator[SoftBrowser]:
    agent = make_agent(
        sqlite_db, cimd_server.settings, allow_hosts=["api.example.com"], clock=cimd_server.clock
    )
    member_id = make_member(sqlite_db, agent.org_id, role="owner", clock=cimd_server.clock)
    with SoftBrowser(cimd_server) as person:
        person.enroll(enrollment_link_token(sqlite_db, member_id, agent.org_id, clock=cimd_server.clock))
        yield person


def _document(url: str, **overrides: Any) -> dict[str, Any]:
    return {
        "client_id": url,
        "client_name": "Document Client",
        "redirect_uris": ["http://127.0.0.1/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
        **overrides,
    }


def test_a_client_known_from_its_document_connects(
    cimd_server: RunningServer, browser: SoftBrowser, host: DocumentHost
) -> None:
    url = host.url("/oauth/client.json")
    host.publish("/oauth/client.json", _document(url), headers={"Cache-Control": "max-age=300"})
    challenge = pkce()
    page = browser.authorize(authorization_params(url, challenge))
    assert page.status_code == 200, page.text[:500]
    assert "Connect Document Client?" in page.text
    assert f"described by {url}" in page.text
    assert "<strong>127.0.0.1:53682</strong>" in page.text
    code = code_of(browser.consent(page))
    answer = exchange(cimd_server, url, code, challenge.verifier)
    assert answer.status_code == 200, answer.text
    assert answer.json()["refresh_token"].startswith("pw_rt_")
    assert "Document Client" in browser.get("/connections").text


def test_caching_headers_decide_when_the_document_is_fetched_again(
    cimd_server: RunningServer, browser: SoftBrowser, host: DocumentHost, clock: FrozenClock
) -> None:
    url = host.url("/cached.json")
    host.publish("/cached.json", _document(url), headers={"Cache-Control": "max-age=60", "ETag": '"v1"'})
    for _ in range(2):
        assert browser.authorize(authorization_params(url, pkce())).status_code == 200
    assert len(host.asked("/cached.json")) == 1
    clock.advance(61)
    assert browser.authorize(authorization_params(url, pkce())).status_code == 200
    asked = host.asked("/cached.json")
    assert len(asked) == 2
    assert asked[1].get("if-none-match") == '"v1"'  # revalidated: the 304 kept the stored copy

    uncached = host.url("/uncached.json")
    host.publish("/uncached.json", _document(uncached), headers={"Cache-Control": "no-store"})
    for _ in range(2):
        assert browser.authorize(authorization_params(uncached, pkce())).status_code == 200
    assert len(host.asked("/uncached.json")) == 2


@pytest.mark.parametrize(
    ("document", "sentence"),
    [
        (
            {"client_id": "https://elsewhere.example/client.json"},
            "The document names a client_id other than its own URL.",
        ),
        (
            {"redirect_uris": ["https://app.example/cb#frag"]},
            "The document's redirect_uris are missing or not acceptable",
        ),
        (
            {"redirect_uris": ["view-source:https://app.example/cb"]},
            "The document's redirect_uris are missing or not acceptable",
        ),
        (
            {"redirect_uris": ["jar:https://app.example/x.jar!/cb"]},
            "The document's redirect_uris are missing or not acceptable",
        ),
        (
            {"redirect_uris": ["x-javascript:alert(1)"]},
            "The document's redirect_uris are missing or not acceptable",
        ),
        (
            {"redirect_uris": ["myapp:/callback"]},
            "The document's redirect_uris are missing or not acceptable",
        ),
        (
            {"token_endpoint_auth_method": "client_secret_basic"},
            "asks for a client authentication method other than none",
        ),
        ({"grant_types": ["client_credentials"]}, "asks for grant or response types other than"),
    ],
)
def test_an_unusable_document_is_refused_on_a_page(
    browser: SoftBrowser, host: DocumentHost, document: dict[str, Any], sentence: str
) -> None:
    url = host.url("/bad.json")
    host.publish("/bad.json", _document(url, **document))
    page = browser.authorize(authorization_params(url, pkce()))
    assert page.status_code == 400
    assert PREFIX in _text(page)
    assert sentence in _text(page)
    assert "location" not in page.headers


def test_a_document_that_is_too_large_or_missing_is_refused(browser: SoftBrowser, host: DocumentHost) -> None:
    big = host.url("/big.json")
    host.publish("/big.json", json.dumps(_document(big, padding="x" * 20_000)).encode())
    assert "The document is larger than 16 KB." in _text(browser.authorize(authorization_params(big, pkce())))
    missing = host.url("/missing.json")
    assert "did not answer with the document (HTTP 200)" in _text(
        browser.authorize(authorization_params(missing, pkce()))
    )


def test_a_redirect_uri_the_document_does_not_list_is_refused(
    browser: SoftBrowser, host: DocumentHost
) -> None:
    url = host.url("/client.json")
    host.publish("/client.json", _document(url))
    page = browser.authorize(authorization_params(url, pkce(), redirect_uri="https://evil.example/callback"))
    assert page.status_code == 400
    assert "an address it never registered" in page.text
    # The loopback redirect it lists matches on any port.
    assert browser.authorize(authorization_params(url, pkce(), redirect_uri=CALLBACK)).status_code == 200


@pytest.mark.parametrize(
    ("url", "answers"),
    [
        ("https://127.0.0.1:{port}/client.json", {}),
        ("https://internal.example:{port}/client.json", {"internal.example": [["10.0.0.7"]]}),
        ("https://metadata.example:{port}/client.json", {"metadata.example": [["169.254.169.254"]]}),
    ],
)
def test_a_document_on_a_private_address_is_never_fetched(
    sqlite_db: Database,
    clock: FrozenClock,
    authority: TestAuthority,
    host: DocumentHost,
    url: str,
    answers: dict[str, list[list[str]]],
) -> None:
    fetcher = _fetcher(authority, answers=answers, allow_private=False)
    extra = {"PAYWARDEN_ALLOW_PRIVATE_HOSTS": "0"}
    with (
        serve(
            sqlite_db.url, public_host="localhost", clock=clock, document_http=fetcher, extra=extra
        ) as running,
        SoftBrowser(running) as visitor,
    ):
        target = url.format(port=host.server.port)
        page = visitor.authorize(authorization_params(target, pkce()))
    assert page.status_code == 400
    assert f"{PREFIX} Its address is on a private or local network, which Paywarden never fetches." in _text(
        page
    )
    assert host.requests == []


@pytest.mark.parametrize(
    "url",
    ["http://client.example/client.json", "https://client.example/", "https://user:pw@client.example/c.json"],
)
def test_a_client_id_url_that_is_not_a_document_url_is_refused(browser: SoftBrowser, url: str) -> None:
    page = browser.authorize(authorization_params(url, pkce()))
    assert page.status_code == 400
    assert "Its client ID must be an https URL with a path" in _text(page)


def test_a_document_that_failed_is_not_fetched_again_for_a_while(
    cimd_server: RunningServer,
    browser: SoftBrowser,
    host: DocumentHost,
    clock: FrozenClock,
    sqlite_db: Database,
) -> None:
    url = host.url("/gone.json")  # nothing published: the host answers 404
    for _ in range(3):
        page = browser.authorize(authorization_params(url, pkce()))
        assert page.status_code == 400
        assert "did not answer with the document (HTTP 200)" in _text(page)
    assert len(host.asked("/gone.json")) == 1
    # The failure is in the database, where every process finds it.
    with sqlite_db.read() as session:
        remembered = session.exec(select(ClientDocumentFailure)).all()
    assert [(row.url, row.reason) for row in remembered] == [(url, "bad_status")]

    host.publish("/gone.json", _document(url))
    clock.advance(cimd_server.settings.client_document_failure_ttl - 1)
    assert browser.authorize(authorization_params(url, pkce())).status_code == 400
    assert len(host.asked("/gone.json")) == 1
    clock.advance(2)
    assert browser.authorize(authorization_params(url, pkce())).status_code == 200
    assert len(host.asked("/gone.json")) == 2


def test_authorization_requests_are_rate_limited_per_address(
    sqlite_db: Database, clock: FrozenClock, authority: TestAuthority, host: DocumentHost
) -> None:
    fetcher = _fetcher(authority, answers={HOST: [["127.0.0.1"]]}, allow_private=True)
    extra = {"PAYWARDEN_RATE_LIMIT_AUTHORIZE": "3"}
    with (
        serve(
            sqlite_db.url, public_host="localhost", clock=clock, document_http=fetcher, extra=extra
        ) as running,
        SoftBrowser(running) as visitor,
    ):
        pages = [
            visitor.authorize(authorization_params(host.url(f"/client-{index}.json"), pkce()))
            for index in range(5)
        ]
    assert [page.status_code for page in pages] == [400, 400, 400, 429, 429]
    assert "Too many requests came from here in a short time. Wait a minute and try again." in _text(pages[3])
    assert 1 <= int(pages[3].headers["retry-after"]) <= 60
    # The refused requests fetched nothing.
    assert [request["path"] for request in host.requests] == [f"/client-{index}.json" for index in range(3)]
