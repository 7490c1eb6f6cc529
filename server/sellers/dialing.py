"""The connection layer of the seller client: resolve, judge every address, dial a judged one.

`GuardedBackend` is an httpcore network backend made for one exchange. httpcore asks it to open a
TCP connection to the URL's host; it resolves the host itself (or reads it as an IP literal),
refuses the whole host if any address is blocked, and connects to one of the addresses it just
judged, by address. TLS is then started by httpcore with the URL's host name as the server name,
so certificates are still verified against the name, not the address. It also records what it
dialled and whether any request bytes were written, which is how the client tells "the request
never left" from "the answer was lost".
"""

from __future__ import annotations

import ssl
import typing
from collections.abc import Iterable

import httpcore
import httpx

from server.kit.errors import InputReason, InvalidInput
from server.sellers.addresses import (
    AddressPolicy,
    InvalidHost,
    IPAddress,
    canonical,
    parse_ip_literal,
    parse_resolved,
)
from server.sellers.errors import PrivateAddressBlocked, SellerUnreachable
from server.sellers.resolver import ResolutionFailed, Resolver

SocketOption = typing.Any  # httpcore's SOCKET_OPTION union; never set by Paywarden


class AddressGuard:
    """Turns a host into the addresses a seller may be reached at, or refuses it."""

    def __init__(self, *, policy: AddressPolicy, resolver: Resolver) -> None:
        self.policy = policy
        self._resolver = resolver

    def judge(self, address: IPAddress, *, loopback_only: bool = False) -> IPAddress:
        if self.policy.blocked_reason(address) is not None:
            raise PrivateAddressBlocked()
        if loopback_only and not self.policy.is_loopback(address):
            # http:// is only ever allowed to this machine, in development.
            raise InvalidInput(InputReason.HTTPS_REQUIRED)
        return address

    def literal(self, host: str) -> IPAddress | None:
        try:
            return parse_ip_literal(host)
        except InvalidHost as exc:
            raise InvalidInput(InputReason.INVALID_URL) from exc

    async def vet(self, host: str, port: int, *, loopback_only: bool = False) -> list[IPAddress]:
        """Every address of `host`, each judged; one blocked address refuses the host."""
        literal = self.literal(host)
        if literal is not None:
            return [self.judge(literal, loopback_only=loopback_only)]
        try:
            answers = await self._resolver.resolve(host, port)
        except ResolutionFailed as exc:
            raise SellerUnreachable() from exc
        if not answers:
            raise SellerUnreachable()
        try:
            addresses = [parse_resolved(answer) for answer in answers]
        except InvalidHost as exc:
            raise SellerUnreachable() from exc
        return [self.judge(address, loopback_only=loopback_only) for address in addresses]


class _WatchedStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream, backend: GuardedBackend) -> None:
        self._inner = inner
        self._backend = backend

    # httpcore's interface names the parameter `timeout`; Paywarden never passes one (the
    # client bounds each exchange with its own deadline).
    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if buffer:
            self._backend.request_written = True
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109
    ) -> httpcore.AsyncNetworkStream:
        tls = await self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _WatchedStream(tls, self._backend)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """A network backend for one exchange with a seller.

    `pin` dials that address only (still judged): the paid request goes to the address that
    served the challenge, whatever the name resolves to by then.
    """

    def __init__(self, guard: AddressGuard, *, loopback_only: bool = False, pin: str | None = None) -> None:
        self._guard = guard
        self._inner = httpcore.AnyIOBackend()
        self._loopback_only = loopback_only
        self._pin = pin
        self.dialled: list[str] = []
        self.peer: str | None = None
        self.request_written = False

    async def _addresses(self, host: str, port: int) -> list[IPAddress]:
        if self._pin is not None:
            return [self._guard.judge(parse_resolved(self._pin), loopback_only=self._loopback_only)]
        return await self._guard.vet(host, port, loopback_only=self._loopback_only)

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._addresses(host, port)
        failure: Exception | None = None
        for address in addresses:
            text = canonical(address)
            self.dialled.append(text)
            try:
                stream = await self._inner.connect_tcp(text, port, timeout=timeout)
            except httpcore.ConnectError as exc:
                failure = exc
                continue
            self.peer = text
            return _WatchedStream(stream, self)
        raise httpcore.ConnectError("no address of the host accepted a connection") from failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("sellers are only reached over TCP")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's own transport, on a connection pool that dials through a GuardedBackend.

    No keep-alive: every request opens its own connection, resolved and judged afresh, and a paid
    request is never written onto a connection the seller may already have closed.
    """

    def __init__(self, *, ssl_context: ssl.SSLContext, backend: GuardedBackend) -> None:
        super().__init__(verify=ssl_context, trust_env=False, retries=0)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=4,
            max_keepalive_connections=0,
            http1=True,
            http2=False,
            retries=0,
            network_backend=backend,
        )
