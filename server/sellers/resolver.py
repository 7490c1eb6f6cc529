"""Name resolution for the seller client, behind a small interface tests can replace.

The client resolves a host once per connection, judges every address the answer holds, and then
dials one of those same addresses: the name is never handed to anything that would resolve it a
second time, so an answer that changes between the check and the connection (DNS rebinding)
cannot slip a private address past the check.
"""

from __future__ import annotations

import socket
from typing import Protocol

import anyio


class ResolutionFailed(Exception):
    """The name did not resolve (no such host, or the resolver failed)."""


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[str]:
        """Every address `host` resolves to for a TCP connection to `port`, as text."""
        ...


class SystemResolver:
    """The operating system's resolver (getaddrinfo), run off the event loop by anyio."""

    async def resolve(self, host: str, port: int) -> list[str]:
        try:
            answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise ResolutionFailed(host) from exc
        addresses: list[str] = []
        for _family, _type, _proto, _canonical, sockaddr in answers:
            address = str(sockaddr[0])
            if address not in addresses:
                addresses.append(address)
        return addresses
