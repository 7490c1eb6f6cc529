"""An agent that makes its HTTP requests itself, as pay_x402 expects one: it gets the seller's 402,
passes it on as received, and sends the header Paywarden hands it."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.seller import Seller
from tests.support.x402_wire import PAYMENT_REQUIRED, decode_header

SELLER_TIMEOUT_S = 30  # a paid request settles on chain before the seller answers


def challenge_of(seller: Seller, path: str) -> dict[str, Any]:
    """What the agent's own client gets: the seller's 402, its PAYMENT-REQUIRED decoded."""
    asked = httpx.get(seller.url(path), timeout=SELLER_TIMEOUT_S)
    assert asked.status_code == 402
    return decode_header(asked.headers[PAYMENT_REQUIRED])


def pay_args(url: str, required: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "url": url,
        "accepts": required["accepts"],
        "x402Version": required["x402Version"],
        "resource": required["resource"],
        **extra,
    }


def send(url: str, signed: dict[str, Any]) -> httpx.Response:
    """The agent's own request, again, with the header Paywarden handed it."""
    return httpx.get(url, headers={signed["headerName"]: signed["headerValue"]}, timeout=SELLER_TIMEOUT_S)
