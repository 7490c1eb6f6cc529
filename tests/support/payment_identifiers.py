"""A seller's side of the x402 `payment-identifier` extension, built from the x402 SDK's own parts.

Routes declare the extension with the SDK's `declare_payment_identifier_extension`, the resource
server registers the SDK's `payment_identifier_resource_server_extension`, and the SDK's
`extract_payment_identifier` reads the id from each payment, as the extension's specification
says a seller does:

- a new id is processed normally (verified, served, settled), and its settlement kept;
- the same id with the same payment answers again from that record: the SDK's before-verify and
  before-settle hooks skip the facilitator, so nothing is charged a second time;
- the same id with another payment is 409 Conflict (an ASGI layer in front of the SDK's
  middleware, as the SDK has no status of its own for it), and nothing is processed.

"The same payment" is what the specification binds an id to: scheme, network, asset, amount,
payee, the resource's method and path, and here the payer.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send
from x402 import x402ResourceServer
from x402.extensions.payment_identifier import (
    PAYMENT_IDENTIFIER,
    declare_payment_identifier_extension,
    extract_payment_identifier,
    payment_identifier_resource_server_extension,
)
from x402.http.utils import decode_payment_signature_header
from x402.schemas import PaymentPayload, SettleResponse, VerifyResponse
from x402.schemas.hooks import (
    SettleContext,
    SettleResultContext,
    SkipSettleResult,
    SkipVerifyResult,
    VerifyContext,
)

CONFLICT_BODY = b'{"error":"payment identifier already used for a different payment"}'


def declared() -> dict[str, Any]:
    """A route's `extensions`: the payment-identifier extension, optional for buyers."""
    return {PAYMENT_IDENTIFIER: declare_payment_identifier_extension()}


class IdentifierLedger:
    """The ids a seller has seen: the payment each first came with, and the settlement it got."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # written on the seller's thread, read on the test's
        self._first: dict[str, str] = {}
        self._settled: dict[str, SettleResponse] = {}
        self.arrivals: Counter[str] = Counter()  # paid requests carrying each id
        self.settlements: Counter[str] = Counter()  # settlements the facilitator made for each id
        self.conflicts: Counter[str] = Counter()

    def seed(self, identifier: str, fingerprint: str) -> None:
        """Record `identifier` as used by another payment (one made elsewhere, before)."""
        with self._lock:
            self._first[identifier] = fingerprint

    def ids(self) -> set[str]:
        with self._lock:
            return set(self.arrivals)

    def admit(self, identifier: str, fingerprint: str) -> bool:
        """Count an arrival; False when the id belongs to another payment (409)."""
        with self._lock:
            self.arrivals[identifier] += 1
            first = self._first.setdefault(identifier, fingerprint)
            if first != fingerprint:
                self.conflicts[identifier] += 1
                return False
            return True

    def settled(self, identifier: str) -> SettleResponse | None:
        with self._lock:
            return self._settled.get(identifier)

    def keep(self, identifier: str, result: SettleResponse) -> None:
        with self._lock:
            self._settled[identifier] = result
            self.settlements[identifier] += 1

    def register_hooks(self, server: x402ResourceServer) -> None:
        # The SDK's own object; its Protocol lists optional hooks this extension leaves out (the SDK
        # reads them with getattr), which mypy cannot tell.
        server.register_extension(payment_identifier_resource_server_extension)  # type: ignore[arg-type]
        server.on_before_verify(self._before_verify)
        server.on_before_settle(self._before_settle)
        server.on_after_settle(self._after_settle)

    def _before_verify(self, context: VerifyContext) -> SkipVerifyResult | None:
        identifier = _identifier(context.payment_payload)
        kept = self.settled(identifier) if identifier else None
        if kept is None:
            return None
        return SkipVerifyResult(result=VerifyResponse(is_valid=True, payer=kept.payer))

    def _before_settle(self, context: SettleContext) -> SkipSettleResult | None:
        identifier = _identifier(context.payment_payload)
        kept = self.settled(identifier) if identifier else None
        return SkipSettleResult(result=kept) if kept is not None else None

    def _after_settle(self, context: SettleResultContext) -> None:
        identifier = _identifier(context.payment_payload)
        if identifier and context.result.success and self.settled(identifier) is None:
            self.keep(identifier, context.result)


def _identifier(payload: Any) -> str | None:
    return extract_payment_identifier(payload) if isinstance(payload, PaymentPayload) else None


def fingerprint(payload: PaymentPayload, *, method: str, path: str) -> str:
    accepted = payload.accepted
    authorization = payload.payload.get("authorization", {})
    bound = {
        "scheme": accepted.scheme,
        "network": accepted.network,
        "asset": accepted.asset.lower(),
        "amount": accepted.amount,
        "payTo": accepted.pay_to.lower(),
        "method": method,
        "path": path,
        "payer": str(authorization.get("from", "")).lower(),
    }
    return hashlib.sha256(json.dumps(bound, sort_keys=True).encode()).hexdigest()


class ConflictLayer:
    """In front of the SDK's middleware: a known id with another payment is 409 Conflict."""

    def __init__(self, app: ASGIApp, ledger: IdentifierLedger) -> None:
        self.app = app
        self.ledger = ledger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header = dict(scope["headers"]).get(b"payment-signature")
            payload = _decoded(header)
            identifier = _identifier(payload) if payload is not None else None
            if payload is not None and identifier is not None:
                bound = fingerprint(payload, method=scope["method"], path=scope["path"])
                if not self.ledger.admit(identifier, bound):
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 409,
                            "headers": [(b"content-type", b"application/json")],
                        }
                    )
                    await send({"type": "http.response.body", "body": CONFLICT_BODY})
                    return
        await self.app(scope, receive, send)


def _decoded(header: bytes | None) -> PaymentPayload | None:
    if header is None:
        return None
    try:
        decoded = decode_payment_signature_header(header.decode("latin-1"))
    except Exception:  # not a payment the SDK reads: the SDK's middleware answers it
        return None
    return decoded if isinstance(decoded, PaymentPayload) else None
