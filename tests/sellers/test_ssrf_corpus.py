"""The SSRF corpus: URLs and DNS answers the seller client must never turn into a connection to a
blocked address, checked at the socket.

Every case runs the real client against a resolver the test controls, with `socket.connect` and
`socket.getaddrinfo` recorded (tests/support/socket_guard.py). The assertions are about what the
socket layer saw: the addresses dialled (never a blocked one, and for literal spellings none at
all), and that no name ever reached the system resolver. "Public" answers are routed by the
recorder to a local TLS server holding a certificate for the names, so an allowed exchange really
completes, over TLS verified against the host name, while the record shows the public address that
was dialled.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import pytest

from server.kit.errors import InvalidInput
from server.sellers.addresses import AddressPolicy
from server.sellers.client import SellerClient, SellerRequest, SellerResponse
from server.sellers.errors import PrivateAddressBlocked, SellerUnreachable
from tests.support.hostile_seller import Exchange, ScriptedServer
from tests.support.socket_guard import ScriptedResolver, SocketRecorder
from tests.support.tls import TestAuthority

pytestmark = pytest.mark.anyio

PUBLIC = "93.184.216.34"
PUBLIC_NAMES = ("seller.example", "rebind.example", "pinned.example")


async def corpus_handler(ex: Exchange) -> None:
    if ex.scenario == "ok":
        await ex.respond(200, b"hello", content_type="text/plain")
    elif ex.scenario == "redirect-same":
        await ex.respond(302, b"", Location="/ok/after-redirect")
    elif ex.scenario == "redirect-away":
        await ex.respond(302, b"", Location="https://127.0.0.1/ok")
    elif ex.scenario == "downgrade":
        await ex.respond(302, b"", Location="http://seller.example/ok")
    elif ex.scenario == "creds":
        await ex.respond(302, b"", Location="https://user:pw@seller.example/ok")
    elif ex.scenario == "loop":
        await ex.respond(302, b"", Location=ex.path)
    else:
        await ex.respond(404, b"")


@dataclass
class Servers:
    tls_port: int
    plain_port: int
    authority: TestAuthority


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    authority = TestAuthority.create()
    tls = ScriptedServer(corpus_handler, ssl_context=authority.server_context(*PUBLIC_NAMES)).start()
    plain = ScriptedServer(corpus_handler).start()
    try:
        yield Servers(tls.port, plain.port, authority)
    finally:
        tls.stop()
        plain.stop()


@dataclass(frozen=True)
class Case:
    url: str
    expect: str  # blocked | invalid:<reason> | unreachable | ok | not_followed
    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    allow_private: bool = False
    dialled: tuple[str, ...] | None = ()  # exact addresses dialled; None: not checked beyond safety


BLOCKED_LITERALS = [
    "https://127.0.0.1/ok/1",
    "https://2130706433/ok/1",  # decimal
    "https://0177.0.0.1/ok/1",  # octal
    "https://0x7f.0.0.1/ok/1",  # hex
    "https://0x7f.1/ok/1",  # hex, short
    "https://127.1/ok/1",  # short
    "https://0x7f000001/ok/1",
    "https://017700000001/ok/1",
    "https://127.0.0.1./ok/1",  # trailing dot
    "https://[::1]/ok/1",
    "https://[::ffff:127.0.0.1]/ok/1",  # IPv4-mapped
    "https://[::ffff:7f00:1]/ok/1",
    "https://[64:ff9b::7f00:1]/ok/1",  # NAT64
    "https://[::127.0.0.1]/ok/1",  # IPv4-compatible
    "https://[2002:7f00:1::]/ok/1",  # 6to4
    "https://10.0.0.1/ok/1",
    "https://172.16.5.4/ok/1",
    "https://192.168.1.1/ok/1",
    "https://100.64.0.1/ok/1",  # CGNAT
    "https://169.254.169.254/latest/meta-data/",  # link-local: cloud metadata
    "https://[fe80::1%25eth0]/ok/1",
    "https://0.0.0.0/ok/1",
    "https://0/ok/1",
    "https://[::]/ok/1",
    "https://224.0.0.1/ok/1",  # multicast
    "https://[ff02::1]/ok/1",
    "https://255.255.255.255/ok/1",  # broadcast
    "https://240.0.0.1/ok/1",  # reserved
    "https://192.0.2.10/ok/1",  # documentation
    "https://198.18.0.1/ok/1",  # benchmarking
    "https://[fc00::1]/ok/1",  # ULA
    "https://[fd12:3456::1]/ok/1",
    "https://[2001:db8::1]/ok/1",
    "https://[::ffff:169.254.169.254]/ok/1",
    "https://[64:ff9b::a9fe:a9fe]/ok/1",
    "https://[fd00:ec2::254]/ok/1",  # cloud metadata over IPv6
]

CASES: dict[str, Case] = {
    **{f"literal:{url}": Case(url, "blocked") for url in BLOCKED_LITERALS},
    # Link-local and unspecified stay blocked even when private hosts are allowed.
    "dev:link-local": Case("http://169.254.169.254/", "blocked", allow_private=True),
    "dev:link-local-v6": Case("https://[fe80::1]/ok/1", "blocked", allow_private=True),
    "dev:zero": Case("http://0/ok/1", "blocked", allow_private=True),
    "dev:multicast": Case("https://224.0.0.251/ok/1", "blocked", allow_private=True),
    # Numbers that are not addresses are not names either.
    "invalid:256": Case("https://1.2.3.256/ok/1", "invalid:invalid_url"),
    "invalid:octal-8": Case("https://08.0.0.1/ok/1", "invalid:invalid_url"),
    "invalid:five-parts": Case("https://1.2.3.4.5/ok/1", "invalid:invalid_url"),
    "invalid:numeric-tld": Case("https://seller.123/ok/1", "invalid:invalid_url"),
    "invalid:credentials": Case("https://user:pw@seller.example/ok/1", "invalid:url_credentials"),
    "invalid:scheme": Case("ftp://seller.example/ok/1", "invalid:https_required"),
    "invalid:http-public": Case("http://seller.example/ok/1", "invalid:https_required"),
    "invalid:http-loopback-without-switch": Case("http://127.0.0.1/ok/1", "invalid:https_required"),
    # DNS answers.
    "dns:loopback": Case("https://loop.example/ok/1", "blocked", {"loop.example": [["127.0.0.1"]]}),
    "dns:rfc1918": Case("https://ten.example/ok/1", "blocked", {"ten.example": [["10.1.2.3"]]}),
    "dns:one-bad-among-good": Case(
        "https://mixed.example/ok/1", "blocked", {"mixed.example": [[PUBLIC, "127.0.0.1"]]}
    ),
    "dns:good-after-bad": Case(
        "https://mixed2.example/ok/1", "blocked", {"mixed2.example": [["192.168.0.7", PUBLIC]]}
    ),
    "dns:ipv6-loopback": Case("https://v6.example/ok/1", "blocked", {"v6.example": [["::1"]]}),
    "dns:mapped-private": Case(
        "https://mapped.example/ok/1", "blocked", {"mapped.example": [["::ffff:10.0.0.1"]]}
    ),
    "dns:nat64-metadata": Case(
        "https://nat64.example/ok/1", "blocked", {"nat64.example": [["64:ff9b::a9fe:a9fe"]]}
    ),
    "dns:metadata-with-switch": Case(
        "https://meta.example/ok/1", "blocked", {"meta.example": [["169.254.169.254"]]}, allow_private=True
    ),
    "dns:scoped-link-local": Case(
        "https://scoped.example/ok/1", "blocked", {"scoped.example": [["fe80::1%1"]]}
    ),
    "dns:unspecified-with-switch": Case(
        "https://zero.example/ok/1", "blocked", {"zero.example": [["0.0.0.0"]]}, allow_private=True
    ),
    "dns:cgnat": Case("https://cgnat.example/ok/1", "blocked", {"cgnat.example": [["100.127.255.254"]]}),
    "dns:ula": Case("https://ula.example/ok/1", "blocked", {"ula.example": [["fd00::1"]]}),
    "dns:empty": Case("https://empty.example/ok/1", "unreachable", {"empty.example": [[]]}),
    "dns:garbage": Case("https://garbage.example/ok/1", "unreachable", {"garbage.example": [["0x7f.1"]]}),
    "dns:nxdomain": Case("https://nxdomain.example/ok/1", "unreachable"),
    # Allowed: dialled by the vetted address, TLS verified against the name.
    "ok:public-name": Case(
        "https://seller.example/ok/1", "ok", {"seller.example": [[PUBLIC]]}, dialled=(PUBLIC,)
    ),
    "ok:tls-name-checked": Case(
        "https://wrong.example/ok/1", "unreachable", {"wrong.example": [[PUBLIC]]}, dialled=(PUBLIC,)
    ),
    "ok:public-literal": Case(
        f"https://{PUBLIC}/ok/1", "unreachable", dialled=(PUBLIC,)
    ),  # no cert for an IP
    "ok:loopback-with-switch": Case(
        "http://127.0.0.1:{plain}/ok/1", "ok", allow_private=True, dialled=("127.0.0.1",)
    ),
    "ok:hex-loopback-with-switch": Case(
        "http://0x7f.1:{plain}/ok/1", "ok", allow_private=True, dialled=("127.0.0.1",)
    ),
    "ok:localhost-with-switch": Case(
        "http://localhost:{plain}/ok/1", "ok", {"localhost": [["127.0.0.1"]]}, True, dialled=("127.0.0.1",)
    ),
    "invalid:http-to-lan-with-switch": Case(
        "http://lan.example:{plain}/ok/1", "invalid:https_required", {"lan.example": [["10.0.0.5"]]}, True
    ),
    # Redirects: same origin followed and re-resolved each hop; anything else returned as it is.
    "redirect:same-origin": Case(
        "https://seller.example/redirect-same/1",
        "ok",
        {"seller.example": [[PUBLIC]]},
        dialled=(PUBLIC, PUBLIC),
    ),
    "redirect:to-loopback": Case(
        "https://seller.example/redirect-away/1",
        "not_followed",
        {"seller.example": [[PUBLIC]]},
        dialled=(PUBLIC,),
    ),
    "redirect:downgrade": Case(
        "https://seller.example/downgrade/1",
        "not_followed",
        {"seller.example": [[PUBLIC]]},
        dialled=(PUBLIC,),
    ),
    "redirect:credentials": Case(
        "https://seller.example/creds/1", "not_followed", {"seller.example": [[PUBLIC]]}, dialled=(PUBLIC,)
    ),
    "redirect:loop-stops-after-3": Case(
        "https://seller.example/loop/1", "not_followed", {"seller.example": [[PUBLIC]]}, dialled=(PUBLIC,) * 4
    ),
    # DNS rebinding: the first answer is public, the next one private.
    "rebind:second-hop": Case(
        "https://rebind.example/redirect-same/1",
        "blocked",
        {"rebind.example": [[PUBLIC], ["127.0.0.1"]]},
        dialled=(PUBLIC,),
    ),
    "rebind:second-hop-metadata": Case(
        "https://rebind.example/redirect-same/2",
        "blocked",
        {"rebind.example": [[PUBLIC], ["169.254.169.254"]]},
        dialled=(PUBLIC,),
    ),
}


def _client(case: Case, servers: Servers, resolver: ScriptedResolver) -> SellerClient:
    return SellerClient(
        max_response_bytes=65536,
        allow_private_hosts=case.allow_private,
        resolver=resolver,
        ssl_context=servers.authority.client_context(),
    )


async def _outcome(client: SellerClient, url: str) -> tuple[str, SellerResponse | None]:
    try:
        with anyio.fail_after(10):
            response = await client.fetch(SellerRequest("GET", url), deadline=anyio.current_time() + 5)
    except PrivateAddressBlocked:
        return "blocked", None
    except InvalidInput as exc:
        return f"invalid:{exc.reason}", None
    except SellerUnreachable:
        return "unreachable", None
    if response.redirect_not_followed:
        return "not_followed", response
    return ("ok" if response.status == 200 else f"status:{response.status}"), response


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40
    assert sum(1 for case in CASES.values() if case.answers) >= 15


@pytest.mark.parametrize("name", list(CASES))
async def test_no_blocked_address_is_ever_dialled(
    name: str, servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    url = case.url.replace("{plain}", str(servers.plain_port))
    recorder = SocketRecorder(route={PUBLIC: servers.tls_port}).install(monkeypatch)
    resolver = ScriptedResolver({host: [list(a) for a in answers] for host, answers in case.answers.items()})

    outcome, response = await _outcome(_client(case, servers, resolver), url)

    assert outcome == case.expect, f"{name}: {outcome}"
    policy = AddressPolicy(case.allow_private)
    for address in recorder.dialled:
        assert policy.blocked_reason(ipaddress.ip_address(address)) is None, f"{name} dialled {address}"
    assert recorder.name_lookups == [], "a name reached the system resolver"
    if case.dialled is not None:
        assert tuple(recorder.dialled) == case.dialled
    if outcome == "ok":
        assert response is not None
        assert response.body == b"hello"
    if name.startswith("literal:"):
        assert resolver.calls == [], "an IP literal was resolved as a name"


async def test_each_redirect_hop_is_resolved_again(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    SocketRecorder(route={PUBLIC: servers.tls_port}).install(monkeypatch)
    resolver = ScriptedResolver({"seller.example": [[PUBLIC]]})
    client = _client(Case("", ""), servers, resolver)
    response = await client.fetch(
        SellerRequest("GET", "https://seller.example/redirect-same/x"), deadline=anyio.current_time() + 5
    )
    assert response.status == 200
    assert resolver.calls == ["seller.example", "seller.example"]


async def test_the_paid_request_goes_to_the_address_that_answered(
    servers: Servers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rebinding between the challenge and the paid request: the paid request is pinned."""
    recorder = SocketRecorder(route={PUBLIC: servers.tls_port}).install(monkeypatch)
    resolver = ScriptedResolver({"pinned.example": [[PUBLIC], ["127.0.0.1"]]})
    client = _client(Case("", ""), servers, resolver)
    deadline = anyio.current_time() + 5

    first = await client.fetch(SellerRequest("GET", "https://pinned.example/ok/1"), deadline=deadline)
    assert first.peer == PUBLIC
    paid = await client.send(
        SellerRequest("GET", "https://pinned.example/ok/1", {"PAYMENT-SIGNATURE": "x"}),
        deadline=deadline,
        after_payment=True,
        pin=first.peer,
    )
    assert paid.status == 200
    assert recorder.dialled == [PUBLIC, PUBLIC]
    assert resolver.calls == ["pinned.example"]  # the second, private answer was never even asked for

    # Without the pin the next resolution is the private one, and it is refused before any dial.
    with pytest.raises(PrivateAddressBlocked):
        await client.send(SellerRequest("GET", "https://pinned.example/ok/1"), deadline=deadline)
    assert recorder.dialled == [PUBLIC, PUBLIC]


async def test_a_pinned_address_is_still_judged(servers: Servers, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = SocketRecorder().install(monkeypatch)
    client = _client(Case("", ""), servers, ScriptedResolver())
    with pytest.raises(PrivateAddressBlocked):
        await client.send(
            SellerRequest("GET", "https://seller.example/ok/1"),
            deadline=anyio.current_time() + 5,
            after_payment=True,
            pin="127.0.0.1",
        )
    assert recorder.dialled == []
