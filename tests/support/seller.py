"""A real x402 v2 seller on loopback, built only from Coinbase's x402 SDK.

Routes are priced in atomic units of a token on a local chain. The SDK's FastAPI middleware
answers 402 with a `PAYMENT-REQUIRED` offer and, once paid, verifies and settles through an
in-process facilitator that sends `transferWithAuthorization` to anvil from a funded key.
No public facilitator is ever contacted. The app runs under uvicorn in a background thread
on a socket bound before start-up, so the port is known and cannot be lost to a race.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from x402 import x402Facilitator, x402ResourceServer
from x402.http.middleware.fastapi import payment_middleware
from x402.http.types import PaymentOption, RouteConfig
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.exact import register_exact_evm_facilitator, register_exact_evm_server

from tests.support.chain import held_port
from tests.support.payment_identifiers import ConflictLayer, IdentifierLedger, declared

DEFAULT_NETWORK = "eip155:84532"
FREE_PATH = "/free"
READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0
# The "exact" scheme's own default; the buyer's validBefore must fall inside it.
MAX_TIMEOUT_S = 300


class PaymentSignatureCounter:
    """Outermost ASGI layer: counts requests carrying a PAYMENT-SIGNATURE header, per path.

    It sits outside the SDK's middleware so it sees every attempt, including those the SDK
    rejects; tests use it to tell "the buyer paid" from "the buyer never tried".
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._counts: Counter[str] = Counter()
        self._last: dict[str, str] = {}
        self._served: dict[str, bytes] = {}
        self._lock = threading.Lock()  # written on the server thread, read on the test thread

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # ASGI header names arrive lower-cased.
        paid = False
        if scope["type"] == "http":
            for name, value in scope["headers"]:
                if name == b"payment-signature":
                    paid = True
                    with self._lock:
                        self._counts[scope["path"]] += 1
                        self._last[scope["path"]] = value.decode("latin-1")
                    break
        if not paid:
            await self.app(scope, receive, send)
            return
        path, chunks = scope["path"], bytearray()

        async def keep(message: Message) -> None:
            if message["type"] == "http.response.body":
                chunks.extend(message.get("body", b""))
                if not message.get("more_body", False):
                    with self._lock:
                        self._served[path] = bytes(chunks)
            await send(message)

        await self.app(scope, receive, keep)

    def served(self, path: str) -> bytes | None:
        """The body of the newest answer to a paid request to `path`, exactly as it was sent."""
        with self._lock:
            return self._served.get(path)

    def last(self, path: str) -> str | None:
        """The PAYMENT-SIGNATURE header of the newest paid request to `path`, as it arrived."""
        with self._lock:
            return self._last.get(path)

    def count(self, path: str) -> int:
        with self._lock:
            return self._counts[path]

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


@dataclass
class Seller:
    """A running seller: where it listens, what it charges and what it has seen."""

    base_url: str
    pay_to: str
    token_address: str
    network: str
    prices: dict[str, int]
    counter: PaymentSignatureCounter
    _server: uvicorn.Server = field(repr=False)
    _thread: threading.Thread = field(repr=False)
    # The payment-identifier extension's record, on a seller that declares it.
    identifiers: IdentifierLedger | None = None

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def payment_signatures(self, path: str) -> int:
        """How many requests to `path` arrived with a PAYMENT-SIGNATURE header."""
        return self.counter.count(path)

    def served(self, path: str) -> bytes | None:
        """The body the seller sent for its newest paid request to `path`, byte for byte."""
        return self.counter.served(path)

    @property
    def payment_signature_counts(self) -> dict[str, int]:
        return self.counter.snapshot()

    def reset_counts(self) -> None:
        self.counter.reset()

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=STOP_TIMEOUT_S)
        if self._thread.is_alive():
            # Idle keep-alive clients can hold a graceful shutdown; do not hang the session on it.
            self._server.force_exit = True
            self._thread.join(timeout=STOP_TIMEOUT_S)


def route_config(
    *,
    price_atomic: int,
    token_address: str,
    pay_to: str,
    network: str,
    extensions: dict[str, Any] | None = None,
) -> RouteConfig:
    # An explicit amount with the EIP-712 domain: the SDK adds name/version only for the real
    # USDC addresses it knows, and without them the facilitator rejects every payment.
    price: dict[str, Any] = {
        "amount": str(price_atomic),
        "asset": token_address,
        "extra": {"name": "USDC", "version": "2"},
    }
    return RouteConfig(
        accepts=PaymentOption(
            scheme="exact",
            pay_to=pay_to,
            price=price,  # type: ignore[arg-type]  # the SDK accepts an AssetAmount-shaped dict
            network=network,
            max_timeout_seconds=MAX_TIMEOUT_S,
        ),
        description="paywarden test seller",
        mime_type="application/json",
        extensions=extensions,
    )


def build_app(
    *,
    rpc_url: str,
    token_address: str,
    pay_to: str,
    facilitator_key: str,
    routes: dict[str, int],
    network: str = DEFAULT_NETWORK,
    identifiers: IdentifierLedger | None = None,
) -> FastAPI:
    """The seller's FastAPI app with the x402 middleware installed (no server started). With
    `identifiers`, every route declares the payment-identifier extension and keeps its record."""
    facilitator = x402Facilitator()
    register_exact_evm_facilitator(
        facilitator,
        FacilitatorWeb3Signer(private_key=facilitator_key, rpc_url=rpc_url),
        networks=network,
    )
    # The in-process facilitator is the resource server's only facilitator client, so nothing
    # can fall back to the SDK's default (public) facilitator URL.
    server = x402ResourceServer(facilitator)
    register_exact_evm_server(server, networks=network)
    if identifiers is not None:
        identifiers.register_hooks(server)

    x402_routes: dict[str, RouteConfig] = {}
    for path, price in routes.items():
        config = route_config(
            price_atomic=price,
            token_address=token_address,
            pay_to=pay_to,
            network=network,
            extensions=declared() if identifiers is not None else None,
        )
        for method in ("GET", "POST"):
            x402_routes[f"{method} {path}"] = config

    # Built once: building it asks the facilitator what it supports and compiles the routes.
    x402_middleware = payment_middleware(x402_routes, server)

    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    app.middleware("http")(x402_middleware)

    async def answer(request: Request) -> dict[str, Any]:
        return {"ok": True, "path": request.url.path, "method": request.method}

    for path in [*routes, FREE_PATH]:
        app.add_api_route(path, answer, methods=["GET", "POST"])
    return app


def start_seller(
    *,
    rpc_url: str,
    token_address: str,
    pay_to: str,
    facilitator_key: str,
    routes: dict[str, int],
    network: str = DEFAULT_NETWORK,
    payment_identifiers: bool = False,
) -> Seller:
    """Start a seller on 127.0.0.1 and return once it accepts requests.

    `routes` maps a path ("/premium") to its price in the token's atomic units; "/free" is
    always there and costs nothing. `facilitator_key` must hold ETH: it pays the gas. With
    `payment_identifiers` it supports the x402 payment-identifier extension (see
    tests/support/payment_identifiers.py).
    """
    if FREE_PATH in routes:
        raise ValueError(f"{FREE_PATH} is the seller's free route and cannot have a price")
    identifiers = IdentifierLedger() if payment_identifiers else None
    app = build_app(
        rpc_url=rpc_url,
        token_address=token_address,
        pay_to=pay_to,
        facilitator_key=facilitator_key,
        routes=routes,
        network=network,
        identifiers=identifiers,
    )
    counter = PaymentSignatureCounter(app if identifiers is None else ConflictLayer(app, identifiers))

    sock = held_port()
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        counter,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name=f"seller:{port}", daemon=True
    )
    thread.start()

    deadline = time.monotonic() + READY_TIMEOUT_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            thread.join(timeout=STOP_TIMEOUT_S)
            sock.close()
            raise RuntimeError(f"seller on 127.0.0.1:{port} did not start")
        time.sleep(0.01)

    return Seller(
        base_url=f"http://127.0.0.1:{port}",
        pay_to=pay_to,
        token_address=token_address,
        network=network,
        prices=dict(routes),
        counter=counter,
        _server=server,
        _thread=thread,
        identifiers=identifiers,
    )
