"""Watch the socket layer itself: every TCP connection attempted and every name looked up.

`SocketRecorder.install(monkeypatch)` wraps `socket.socket.connect` (asyncio, and so anyio and
httpcore, connect through it) and `socket.getaddrinfo`. Only loopback is ever really dialled:
an attempt to a "public" test address is recorded, then either routed to a local test server
(`route`) or refused, so tests can prove which address was dialled without leaving the machine.
Names given to getaddrinfo are recorded and refused: in these tests only the test's resolver may
resolve anything.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from typing import Any

import pytest


class SocketRecorder:
    def __init__(self, route: dict[str, int] | None = None) -> None:
        self.route = dict(route or {})  # public address -> loopback port that answers for it
        self.connects: list[tuple[str, int]] = []
        self.name_lookups: list[str] = []
        self._lock = threading.Lock()

    @property
    def dialled(self) -> list[str]:
        with self._lock:
            return [host for host, _ in self.connects]

    def install(self, monkeypatch: pytest.MonkeyPatch) -> SocketRecorder:
        original_connect = socket.socket.connect
        original_getaddrinfo = socket.getaddrinfo
        recorder = self

        def connect(sock: socket.socket, address: Any) -> None:
            host, port = str(address[0]), int(address[1])
            with recorder._lock:
                recorder.connects.append((host, port))
            target = ipaddress.ip_address(host.split("%", 1)[0])
            if target.is_loopback:
                return original_connect(sock, address)
            if host in recorder.route and sock.family == socket.AF_INET:
                return original_connect(sock, ("127.0.0.1", recorder.route[host]))
            raise ConnectionRefusedError(errno.ECONNREFUSED, "test network: only loopback is reachable")

        def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
            text = host.decode() if isinstance(host, bytes) else str(host)
            try:
                ipaddress.ip_address(text.split("%", 1)[0])
            except ValueError:
                with recorder._lock:
                    recorder.name_lookups.append(text)
                raise socket.gaierror(
                    socket.EAI_NONAME, "test network: names resolve only through the test"
                ) from None
            return original_getaddrinfo(host, *args, **kwargs)

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
        return self


class ScriptedResolver:
    """A resolver whose answers the test writes: per name, a list of answers used in turn (the
    last one repeats). Unknown names do not resolve."""

    def __init__(self, answers: dict[str, list[list[str]]] | None = None) -> None:
        self.answers = {name: list(sequence) for name, sequence in (answers or {}).items()}
        self.calls: list[str] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        from server.sellers.resolver import ResolutionFailed

        self.calls.append(host)
        sequence = self.answers.get(host)
        if not sequence:
            raise ResolutionFailed(host)
        return sequence.pop(0) if len(sequence) > 1 else list(sequence[0])
