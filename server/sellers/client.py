"""Talk to sellers: one request at a time, no redirects followed on our behalf, bounded in time
and size. Bodies beyond the configured cap are cut and marked truncated.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

from server.sellers.errors import PrivateAddressBlocked, ResponseLost, SellerTimeout, SellerUnreachable

MAX_REDIRECTS = 3
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class SellerRequest:
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None


@dataclass(frozen=True)
class SellerResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    url: str
    redirect_not_followed: bool = False
    body_error: str | None = None

    @property
    def content_type(self) -> str:
        return str(self.headers.get("content-type", "application/octet-stream"))


def same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.hostname, pa.port) == (pb.scheme, pb.hostname, pb.port)


class SellerClient:
    def __init__(self, *, max_response_bytes: int, allow_private_hosts: bool) -> None:
        self._max_bytes = max_response_bytes
        self._allow_private = allow_private_hosts
        # Each exchange is bounded as a whole by `deadline` (anyio.fail_after), not per phase.
        self._http = httpx.AsyncClient(follow_redirects=False, trust_env=False, timeout=None)  # noqa: S113

    async def aclose(self) -> None:
        await self._http.aclose()

    def _check_target(self, url: str) -> None:
        host = urlsplit(url).hostname or ""
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return
        if address.is_link_local or (not self._allow_private and not address.is_global):
            raise PrivateAddressBlocked()

    async def send(
        self, request: SellerRequest, *, deadline: float, after_payment: bool = False
    ) -> SellerResponse:
        """One request. Before payment, failures are seller_unreachable or seller_timeout; after
        payment (`after_payment=True`) any failure once the request may have left is ResponseLost.
        """
        self._check_target(request.url)
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            raise SellerTimeout()
        sent = False
        try:
            with anyio.fail_after(remaining):
                http_request = self._http.build_request(
                    request.method, request.url, headers=dict(request.headers), content=request.body
                )
                sent = True
                response = await self._http.send(http_request, stream=True)
                try:
                    body, truncated, body_error = await self._read_body(response)
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            if after_payment and sent:
                raise ResponseLost("deadline passed") from exc
            raise SellerTimeout() from exc
        except httpx.ConnectError as exc:
            raise SellerUnreachable() from exc
        except httpx.HTTPError as exc:
            if after_payment:
                raise ResponseLost(type(exc).__name__) from exc
            raise SellerUnreachable() from exc
        return SellerResponse(
            response.status_code, response.headers, body, truncated, request.url, False, body_error
        )

    async def _read_body(self, response: httpx.Response) -> tuple[bytes, bool, str | None]:
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in response.aiter_raw():
                room = self._max_bytes - size
                if len(chunk) > room:
                    chunks.append(chunk[:room])
                    return b"".join(chunks), True, None
                chunks.append(chunk)
                size += len(chunk)
        except httpx.ReadError:
            if response.status_code < 300:
                return b"".join(chunks), False, "the body could not be read completely"
            raise
        return b"".join(chunks), False, None

    async def fetch_before_payment(self, request: SellerRequest, *, deadline: float) -> SellerResponse:
        """Follow same-origin redirects (up to 3) until something other than a redirect answers.

        A redirect to another origin is returned as it is, flagged `redirect_not_followed`.
        """
        current = request
        for _ in range(MAX_REDIRECTS + 1):
            response = await self.send(current, deadline=deadline)
            location = response.headers.get("location")
            if response.status not in REDIRECT_STATUSES or not location:
                return response
            target = urljoin(current.url, location)
            if not same_origin(current.url, target):
                return _flag_redirect(response)
            keep_body = response.status in (307, 308)
            current = SellerRequest(
                method=current.method if keep_body or current.method == "HEAD" else "GET",
                url=target,
                headers=current.headers,
                body=current.body if keep_body else None,
            )
        return _flag_redirect(response)


def _flag_redirect(response: SellerResponse) -> SellerResponse:
    return SellerResponse(
        response.status,
        response.headers,
        response.body,
        response.truncated,
        response.url,
        True,
        response.body_error,
    )
