"""A small JSON-RPC client for the few calls Paywarden makes: reads, and, for a sweep alone, sending
the transaction an operator's gas account signed (server/chain/submission.py)."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from server.kit.metrics import RPC_LATENCY, rpc_method_label, timed


class RpcError(Exception):
    pass


class RpcRefused(RpcError):
    """The node answered, with a JSON-RPC error: a call that reverted, a transaction refused."""

    def __init__(self, method: str, error: object) -> None:
        message = error.get("message") if isinstance(error, dict) else None
        super().__init__(f"{method} returned an error: {str(message)[:200]}")


class JsonRpc:
    def __init__(self, url: str, *, timeout_s: float = 10.0) -> None:
        self.url = url
        self._http = httpx.AsyncClient(timeout=timeout_s, trust_env=False, follow_redirects=False)
        self._ids = itertools.count(1)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(self, method: str, params: list[Any]) -> Any:
        with timed(RPC_LATENCY, method=rpc_method_label(method), outcome="error") as labels:
            try:
                response = await self._http.post(
                    self.url,
                    json={"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params},
                )
                document = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise RpcError(f"{method} failed: {type(exc).__name__}") from exc
            if not isinstance(document, dict):
                raise RpcError(f"{method} returned no JSON-RPC answer")
            if "error" in document:
                raise RpcRefused(method, document["error"])
            labels["outcome"] = "ok"
            return document.get("result")
