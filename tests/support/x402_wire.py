"""The x402 v2 wire format by hand: decode offers and receipts, sign an "exact" EVM payment.

Deliberately independent of the x402 SDK's client so tests can check a seller (or our own
code) against the protocol itself. Headers carry base64-encoded JSON; the payment is an
EIP-3009 `TransferWithAuthorization` signed with EIP-712 (see the x402 "exact" EVM scheme).
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any

from eth_account import Account

PAYMENT_REQUIRED = "PAYMENT-REQUIRED"
PAYMENT_SIGNATURE = "PAYMENT-SIGNATURE"
PAYMENT_RESPONSE = "PAYMENT-RESPONSE"

TRANSFER_WITH_AUTHORIZATION_TYPES: dict[str, list[dict[str, str]]] = {
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ]
}


def decode_header(value: str) -> dict[str, Any]:
    """Decode a base64 JSON header (PAYMENT-REQUIRED, PAYMENT-SIGNATURE, PAYMENT-RESPONSE)."""
    decoded: dict[str, Any] = json.loads(base64.b64decode(value))
    return decoded


def encode_header(value: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(value, separators=(",", ":")).encode()).decode("ascii")


def chain_id_of(network: str) -> int:
    """The EVM chain id in a CAIP-2 network id such as "eip155:84532"."""
    namespace, _, reference = network.partition(":")
    if namespace != "eip155" or not reference.isdigit():
        raise ValueError(f"not an EVM CAIP-2 network: {network!r}")
    return int(reference)


@dataclass(frozen=True)
class SignedPayment:
    """A PAYMENT-SIGNATURE header value and the parts tests check against the chain."""

    header: str
    payload: dict[str, Any]
    payer: str
    nonce: str  # 0x-prefixed 32-byte hex

    @property
    def nonce_bytes(self) -> bytes:
        return bytes.fromhex(self.nonce.removeprefix("0x"))


def sign_exact_payment(
    payment_required: dict[str, Any],
    private_key: str,
    *,
    offer_index: int = 0,
    valid_for_s: int = 120,
    nonce: str | None = None,
    now: int | None = None,
) -> SignedPayment:
    """Sign the seller's offer `accepts[offer_index]` from a decoded PAYMENT-REQUIRED body.

    The offer is echoed verbatim as `accepted`: the seller compares it field by field,
    address case included, so it must not be normalised or rebuilt.
    """
    offer = payment_required["accepts"][offer_index]
    if offer["scheme"] != "exact":
        raise ValueError(f"only the exact scheme is supported, not {offer['scheme']!r}")
    account = Account.from_key(private_key)
    now = int(time.time()) if now is None else now
    nonce = nonce or "0x" + secrets.token_hex(32)
    authorization = {
        "from": account.address,
        "to": offer["payTo"],
        "value": str(offer["amount"]),
        # A few seconds back, so that clock skew with the chain cannot make it "not yet valid".
        "validAfter": str(now - 5),
        # The facilitator wants at least 6 s of validity left when it verifies.
        "validBefore": str(now + valid_for_s),
        "nonce": nonce,
    }
    extra = offer.get("extra") or {}
    signed = Account.sign_typed_data(
        private_key,
        domain_data={
            "name": extra["name"],
            "version": extra["version"],
            "chainId": chain_id_of(offer["network"]),
            "verifyingContract": offer["asset"],
        },
        message_types=TRANSFER_WITH_AUTHORIZATION_TYPES,
        message_data={
            **authorization,
            "value": int(authorization["value"]),
            "validAfter": int(authorization["validAfter"]),
            "validBefore": int(authorization["validBefore"]),
            "nonce": bytes.fromhex(nonce.removeprefix("0x")),
        },
    )
    payload: dict[str, Any] = {
        "x402Version": 2,
        "resource": payment_required.get("resource"),
        "accepted": offer,
        "payload": {"signature": "0x" + bytes(signed.signature).hex(), "authorization": authorization},
    }
    return SignedPayment(header=encode_header(payload), payload=payload, payer=account.address, nonce=nonce)
