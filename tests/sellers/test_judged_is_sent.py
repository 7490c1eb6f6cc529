"""Property: what the policy judges is exactly what a real seller receives on the socket, or nothing
is sent at all.

Generated URLs mix dot segments, escapes in both cases, stray and ambiguous escapes, host names in
mixed case, with trailing dots, internationalised, and IPv4 addresses in odd spellings, followed by
same-origin (and other) redirects. Each goes through the real seller client to a real HTTP server
on loopback that records the raw request line and Host header of every request it gets. The judge
is the real policy function (`judge_location`) with an allowed host typed by a person in another
spelling and a deny rule on a path prefix. Names resolve to loopback through a resolver that
records what it was asked: the name judged must be the name resolved.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import anyio
import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from server.kit.errors import InvalidInput
from server.payments.inputs import validate_fetch_paid
from server.policy.engine import judge_location
from server.policy.hosts import HostPatternError, normalize_pattern
from server.policy.model import Policy
from server.policy.rules import Rule, clean_path_prefix
from server.sellers.addresses import parse_ip_literal
from server.sellers.client import SellerClient, SellerRequest, SellerResponse
from server.sellers.urls import Target, parse_target
from server.vocabulary import RuleKind, RuleScope
from tests.support.hostile_seller import Exchange, ScriptedServer

DENY_PREFIXES = ("/premium", "/a/", "/~u", "/free/premium", "/p!")


@dataclass
class Wire:
    """The seller's side: every request line and Host header as it arrived, and a script of answers."""

    seen: list[tuple[str, str]] = field(default_factory=list)  # (request target, Host header)
    script: list[str] = field(default_factory=list)  # Location of each redirect to answer, in turn
    lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    async def handle(self, ex: Exchange) -> None:
        with self.lock:
            self.seen.append((ex.target, ex.headers.get("host", "")))
            location = self.script.pop(0) if self.script else None
        if location is None:
            await ex.respond(402, b"{}")
        else:
            await ex.respond(302, b"", Location=location)

    def reset(self, script: list[str]) -> None:
        with self.lock:
            self.seen.clear()
            self.script = list(script)


@pytest.fixture(scope="module")
def wire() -> Iterator[Wire]:
    state = Wire()
    server = ScriptedServer(state.handle).start()
    state.port = server.port
    try:
        yield state
    finally:
        server.stop()


class LoopbackResolver:
    """Every name is this machine; the names asked for are recorded."""

    def __init__(self) -> None:
        self.names: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.names.append(host)
        return ["127.0.0.1"]


class Denied(Exception):
    pass


# -- strategies ------------------------------------------------------------------------------

UNRESERVED = "abcXYZ019-._~"
PUNCTUATION = "!$&'()*+,=:@;"
ODD = '"<>[]^`{|}\\%'


def _escape(byte: int, upper: bool) -> str:
    text = f"%{byte:02x}"
    return text.upper() if upper else text


escapes = st.builds(
    _escape,
    st.one_of(
        st.sampled_from([0x2F, 0x2E, 0x5C, 0x25, 0x00, 0x3B, 0x0A, 0x70, 0x7E, 0x41, 0x21, 0x20, 0x3F]),
        st.integers(0, 255),
    ),
    st.booleans(),
)
segment = st.one_of(
    st.sampled_from([".", "..", "", "premium", "free", "a", "~u", "p!", "%70remium", "%7Eu"]),
    st.lists(
        st.one_of(st.sampled_from(list(UNRESERVED + PUNCTUATION + ODD)), escapes, st.just("é")),
        min_size=1,
        max_size=5,
    ).map("".join),
)
plain_paths = st.lists(segment, max_size=5).map(lambda parts: "/" + "/".join(parts))
# Spellings that lead into a denied prefix, so denials are common enough to be tested.
toward_denied = st.sampled_from(
    ["/premium", "/free/../premium", "/%70remium", "/a/./", "/%7eu", "/p%21", "/x/../a/"]
)
paths = st.one_of(plain_paths, st.tuples(toward_denied, plain_paths).map("".join))
queries = st.one_of(
    st.none(),
    st.lists(st.one_of(st.sampled_from(list(UNRESERVED + PUNCTUATION + "/?=&é")), escapes), max_size=6).map(
        "".join
    ),
)
ascii_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,6}[a-z0-9])?", fullmatch=True)
ascii_labels = st.lists(ascii_label, min_size=1, max_size=2)
idn_labels = st.sampled_from(["faß", "bücher", "ＡＰＩ", "пример", "例え", "xn--fa-hia", "straße", "ǅ"])


@st.composite
def hosts(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["ascii", "idn", "number"]))
    if kind == "number":
        spellings = ["127.0.0.1", "0x7f.1", "2130706433", "127.1", "0177.0.0.1", "１２７.0.0.1"]
        return draw(st.sampled_from(spellings))
    labels = draw(ascii_labels)
    if kind == "idn":
        labels = [draw(idn_labels), *labels]
    name = ".".join([*labels, "example"])
    name = "".join(ch.upper() if ch.isascii() and draw(st.booleans()) else ch for ch in name)
    return name + ("." if draw(st.booleans()) else "")


def other_spelling(host: str) -> str:
    """The same host as a person might type it into the allow-list: other case, a trailing dot."""
    flipped = "".join(ch.swapcase() if ch.isascii() else ch for ch in host)
    return flipped if flipped.endswith(".") else flipped + "."


@st.composite
def locations(draw: st.DrawFn, host: str, port: int) -> str:
    path = draw(paths).replace("é", "%C3%A9")  # header values are ASCII on the wire
    kind = draw(st.sampled_from(["absolute-path", "relative", "same-origin-url", "other-origin"]))
    if kind == "relative":
        return path.lstrip("/") or "."
    if kind == "same-origin-url":
        # Header values are ASCII: an internationalised host comes back in its A-label form.
        ascii_host = host if host.isascii() else normalize_pattern(host)
        return f"http://{other_spelling(ascii_host)}:{port}{path}"
    if kind == "other-origin":
        return f"http://other.example:{port}{path}"
    return path


# -- the property ----------------------------------------------------------------------------


async def _fetch(client: SellerClient, url: str, judge: object) -> SellerResponse:
    with anyio.fail_after(10):
        return await client.fetch(SellerRequest("GET", url), deadline=anyio.current_time() + 8, judge=judge)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), host=hosts(), path=paths, query=queries, deny=st.sampled_from(DENY_PREFIXES))
@example(data=None, host="h.example", path="/free/../premium", query=None, deny="/premium")
@example(data=None, host="h.example", path="/%70remium", query=None, deny="/premium")
@example(data=None, host="faß.example", path="/x", query=None, deny="/premium")
@example(data=None, host="faß.00--0.example", path="/", query=None, deny="/premium")
def test_what_the_policy_judges_is_what_the_seller_receives(
    wire: Wire, data: st.DataObject | None, host: str, path: str, query: str | None, deny: str
) -> None:
    url = f"http://{host}:{wire.port}{path}" + ("" if query is None else f"?{query}")
    redirects = [] if data is None else data.draw(st.lists(locations(host, wire.port), max_size=3))
    if data is None and path == "/x":
        redirects = ["/go/../premium"]
    wire.reset(redirects)

    try:
        person_typed = normalize_pattern(other_spelling(host))  # the allow-list entry, as a person typed it
    except HostPatternError:
        person_typed = None  # a name no allow-list can hold: the fetch must refuse it too
    policy = Policy(
        version=1, networks=("eip155:84532",), allow_hosts=() if person_typed is None else (person_typed,)
    )
    prefix = clean_path_prefix(deny)
    assert prefix is not None
    rules = (Rule(id="deny", version=1, scope=RuleScope.ORG, kind=RuleKind.DENY, path_prefix=prefix),)
    judged: list[Target] = []

    def judge(target: Target) -> None:
        judged.append(target)
        decision = judge_location(policy, rules, host=target.host, path=target.path)
        assert "host_not_allowed" not in decision.reasons, "a person's spelling of the host did not match"
        if not decision.allowed:
            raise Denied

    resolver = LoopbackResolver()
    client = SellerClient(max_response_bytes=4096, allow_private_hosts=True, resolver=resolver)
    response: SellerResponse | None = None
    refused: InvalidInput | None = None
    denied = False
    try:
        response = anyio.run(_fetch, client, url, judge)
    except InvalidInput as exc:
        refused = exc
    except Denied:
        denied = True

    # The entry point reads the URL exactly as the client does (https: what agents are allowed).
    https_url = "https" + url[len("http") :]
    try:
        validated: Target | InvalidInput = validate_fetch_paid(
            {"url": https_url}, bearer=None, public_host="paywarden.test", allow_private_hosts=True
        ).target
    except InvalidInput as exc:
        validated = exc

    event("refused" if refused else "denied" if denied else f"{len(judged)} request(s) sent")
    if refused is not None:
        # Refused before anything was judged, resolved or sent, and for the same reason everywhere.
        assert judged == [], f"refused after judging: {refused.as_dict()}"
        assert wire.seen == []
        assert resolver.names == []
        assert isinstance(validated, InvalidInput)
        assert validated.as_dict() == refused.as_dict()
        return
    assert person_typed is not None, "a host the allow-list refuses was sent"
    assert validated == parse_target(https_url)
    assert parse_target(url).host == person_typed

    sent = judged[:-1] if denied else judged
    # Every request that reached the seller was judged, in order, with exactly these bytes...
    assert wire.seen == [(target.request_target, target.authority) for target in sent]
    # ...under the host a person typed, never at a denied path...
    assert all(target.host == person_typed for target in judged)
    assert not any(target.path.startswith(prefix) for target in sent)
    if denied:
        assert judged[-1].path.startswith(prefix)
    # ...and the name judged is the name resolved and dialled.
    if parse_ip_literal(person_typed) is None:
        assert resolver.names == [target.host for target in sent]
    if response is not None:
        assert response.target == judged[-1]
        assert response.redirects == tuple(judged[:-1])
        assert response.status in (302, 402)
