"""The safe seller client: the only way Paywarden talks to a seller (or any URL an agent names).

Every exchange is one request on its own connection, bounded as a whole by a deadline and in
size by `max_response_bytes`:

- https only; http:// only to this machine's loopback, and only with private hosts allowed;
- the host is resolved by the client itself and every address it resolves to is judged
  (see addresses.py); the connection goes to one of those judged addresses, never to a name a
  library would resolve again, while TLS still verifies the certificate against the host name;
- a URL is read once into its canonical target (urls.py), and exactly that target goes on the
  wire: the request line and the Host header are checked against it before anything is sent;
- redirects are never followed by the HTTP library: `fetch` follows same-origin redirects (up to
  3, each hop canonicalised, handed to the caller's `judge` before it is requested, then resolved
  and judged again) and returns any other redirect as it is, flagged `redirect_not_followed`;
  `send` never follows one, which is what a paid request uses;
- bodies are read as a stream and cut at the cap (`truncated`), never buffered past it.

The client knows nothing of policy: `judge` is the caller's, and raises to stop a hop.

fetch_paid and quote_payment use it; every other request Paywarden makes to a URL it was given
must too.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import anyio
import httpx

from server.kit.errors import InputReason, InvalidInput, PaywardenError
from server.kit.metrics import SELLER_LATENCY, SELLER_RESPONSES, status_class
from server.sellers.addresses import AddressPolicy
from server.sellers.dialing import AddressGuard, GuardedBackend, GuardedTransport
from server.sellers.errors import PrivateAddressBlocked, ResponseLost, SellerTimeout, SellerUnreachable
from server.sellers.resolver import Resolver, SystemResolver
from server.sellers.urls import Target, UrlProblem, parse_target, refused, resolve_reference

MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "Paywarden/0.1"

BODY_TIMED_OUT = "The response body did not arrive before the deadline; it is incomplete."
BODY_BROKEN = "The connection broke while the response body was being read; it is incomplete."


# Called with each hop's canonical target before it is requested; raises to stop the request.
Judge = Callable[[Target], None]


@dataclass(frozen=True)
class SellerRequest:
    method: str
    url: str  # read into its canonical target by the client; that target is what is sent
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True)
class SellerResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    target: Target  # exactly what was requested and answered
    request: SellerRequest  # the request that got this answer (after redirects: the last hop's)
    redirects: tuple[Target, ...] = ()  # the hops requested before this one, in order
    redirect_not_followed: bool = False
    body_error: str | None = None  # fixed text of ours; the body is incomplete when set
    peer: str | None = None  # the address the answer came from

    @property
    def url(self) -> str:
        return self.target.url

    @property
    def content_type(self) -> str:
        return str(self.headers.get("content-type", "application/octet-stream"))


def same_origin(a: Target, b: Target) -> bool:
    return a.origin == b.origin


class SellerClient:
    def __init__(
        self,
        *,
        max_response_bytes: int,
        allow_private_hosts: bool,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.max_response_bytes = max_response_bytes
        self.guard = AddressGuard(
            policy=AddressPolicy(allow_private_hosts), resolver=resolver or SystemResolver()
        )
        # Built once: loading the CA bundle is the expensive part of a TLS client.
        self._ssl = ssl_context or httpx.create_ssl_context(trust_env=False)

    async def aclose(self) -> None:
        """Nothing is pooled between exchanges; kept so owners can close every service alike."""

    # -- one request ---------------------------------------------------------------------

    def check_url(self, url: str) -> Target:
        """The canonical target of `url`, or the refusal of what no exchange may ever go to, before
        anything is resolved or sent."""
        target = parse_target(url)
        if target.scheme == "http" and not self.guard.policy.allow_private:
            raise InvalidInput(InputReason.HTTPS_REQUIRED)
        literal = self.guard.literal(target.host)
        if literal is not None:
            self.guard.judge(literal, loopback_only=target.scheme == "http")
        return target

    async def send(
        self, request: SellerRequest, *, deadline: float, after_payment: bool = False, pin: str | None = None
    ) -> SellerResponse:
        """Exactly one request, never a redirect followed.

        Until the request's first byte is written, every failure is the error of what went wrong
        (invalid_input, private_address_blocked, seller_unreachable, seller_timeout): nothing left.
        Once it may have left, a failure before the answer's head arrived is ResponseLost when
        `after_payment`; a failure while reading the body is reported in `body_error`.
        """
        target = self.check_url(request.url)
        if deadline - anyio.current_time() <= 0:
            raise SellerTimeout()
        backend = GuardedBackend(self.guard, loopback_only=target.scheme == "http", pin=pin)
        transport = GuardedTransport(ssl_context=self._ssl, backend=backend)
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("accept-encoding", "user-agent")
        }
        # Identity only: compressed bodies would defeat the size cap (a small gzip can inflate to GBs).
        headers.update({"Accept-Encoding": "identity", "User-Agent": USER_AGENT})
        async with httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            timeout=None,  # noqa: S113
        ) as http:
            try:
                outgoing = http.build_request(
                    request.method, target.url, headers=headers, content=request.body
                )
            except httpx.InvalidURL as exc:
                raise refused(UrlProblem.UNSENDABLE) from exc
            _check_exact(outgoing, target)
            started = time.perf_counter()
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0)):
                    response = await http.send(outgoing, stream=True)
            except PaywardenError:
                raise  # refused before anything was sent: blocked, invalid, unresolvable
            except TimeoutError as exc:
                _observe(started, "timeout")
                if after_payment and backend.request_written:
                    raise ResponseLost("deadline passed before the answer") from exc
                raise SellerTimeout() from exc
            except httpx.HTTPError as exc:
                _observe(started, "unreachable")
                if after_payment and backend.request_written:
                    raise ResponseLost(type(exc).__name__) from exc
                raise SellerUnreachable() from exc
            _observe(started, status_class(response.status_code))
            try:
                body, truncated, body_error = await self._read_body(response, deadline)
            finally:
                with anyio.CancelScope(shield=True):
                    await response.aclose()
        return SellerResponse(
            status=response.status_code,
            headers=response.headers,
            body=body,
            truncated=truncated,
            target=target,
            request=replace(request, url=target.url),
            body_error=body_error,
            peer=backend.peer,
        )

    async def _read_body(self, response: httpx.Response, deadline: float) -> tuple[bytes, bool, str | None]:
        chunks: list[bytes] = []
        size = 0
        cap = self.max_response_bytes
        error: str | None = None
        with anyio.move_on_after(max(deadline - anyio.current_time(), 0)) as scope:
            try:
                async for chunk in response.aiter_raw():
                    room = cap - size
                    if len(chunk) > room:
                        chunks.append(chunk[:room])
                        return b"".join(chunks), True, None
                    chunks.append(chunk)
                    size += len(chunk)
            except httpx.HTTPError:
                error = BODY_BROKEN
        if scope.cancelled_caught:
            error = BODY_TIMED_OUT
        # An incomplete body is marked truncated too: the agent must never take it as whole.
        return b"".join(chunks), error is not None, error

    # -- before payment ------------------------------------------------------------------

    async def fetch(
        self, request: SellerRequest, *, deadline: float, judge: Judge | None = None
    ) -> SellerResponse:
        """Request `request.url`, following same-origin redirects (up to 3), before any payment.

        `judge` sees every hop's canonical target, the first included, before it is requested;
        whatever it raises ends the exchange there. Any other redirect (another origin, https to
        http, a URL with credentials or an ambiguous spelling, a fourth hop) is returned as it is,
        flagged `redirect_not_followed`. A body that cannot be read whole is a failure here:
        nothing has been paid, so nothing partial is worth returning.
        """
        current = replace(request, url=self.check_url(request.url).url)
        earlier: list[Target] = []
        for hop in range(MAX_REDIRECTS + 1):
            target = parse_target(current.url)
            if judge is not None:
                judge(target)
            response = await self.send(current, deadline=deadline)
            response = replace(response, redirects=tuple(earlier))
            if response.body_error == BODY_TIMED_OUT:
                raise SellerTimeout()
            if response.body_error is not None:
                raise SellerUnreachable()
            location = response.headers.get("location")
            if response.status not in REDIRECT_STATUSES or not location:
                return response
            following = _redirect_target(target, location)
            if following is None or hop == MAX_REDIRECTS:
                return replace(response, redirect_not_followed=True)
            earlier.append(target)
            keep_body = response.status in (307, 308)
            current = SellerRequest(
                method=current.method if keep_body or current.method == "HEAD" else "GET",
                url=following.url,
                headers=current.headers,
                body=current.body if keep_body else None,
            )
        raise AssertionError("unreachable")  # pragma: no cover


def _observe(started: float, outcome: str) -> None:
    SELLER_LATENCY.labels(status_class=outcome).observe(time.perf_counter() - started)
    SELLER_RESPONSES.labels(status_class=outcome).inc()


def _redirect_target(current: Target, location: str) -> Target | None:
    """The canonical target to follow, or None when this redirect must not be followed."""
    try:
        target = resolve_reference(current, location)
    except InvalidInput:
        return None  # credentials, another scheme, or a spelling servers read differently
    # Same origin means same scheme too, so an https -> http downgrade is never followed.
    if not same_origin(current, target):
        return None
    return target


def _check_exact(outgoing: httpx.Request, target: Target) -> None:
    """Refuse to send what the HTTP library would write differently from the judged target."""
    if (
        outgoing.url.raw_path != target.request_target.encode("ascii")
        or outgoing.headers.get("host") != target.authority
        or outgoing.url.raw_host != target.host.encode("ascii")
        or outgoing.url.port not in (None, target.port)
    ):
        raise refused(UrlProblem.UNSENDABLE)


__all__ = [
    "MAX_REDIRECTS",
    "REDIRECT_STATUSES",
    "PrivateAddressBlocked",
    "ResponseLost",
    "SellerClient",
    "SellerRequest",
    "SellerResponse",
    "SellerTimeout",
    "SellerUnreachable",
    "Target",
    "same_origin",
]
