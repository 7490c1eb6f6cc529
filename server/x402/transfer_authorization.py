"""EIP-3009 `TransferWithAuthorization`: the typed data a wallet signs, and the header that carries it.

The nonce is derived from the payment intent, so one purchase can move money at most once even if
it were signed twice. The validity window is short: never more than 300 seconds in all.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from eth_hash.auto import keccak

from server.x402.challenge import Challenge
from server.x402.headers import PAYMENT_SIGNATURE, X_PAYMENT
from server.x402.payment_identifier import payload_extensions
from server.x402.selection import Selection

MAX_WINDOW_SECONDS = 300
# validAfter lies this far in the past: a facilitator whose node's newest block lags the wall clock
# must still see the authorisation as valid. It costs nothing (the risk is in validBefore) but it
# counts towards the 300-second window, so validBefore is at most 240 seconds ahead.
CLOCK_SKEW_SECONDS = 60
MIN_VALIDITY_SECONDS = 15

TRANSFER_WITH_AUTHORIZATION_TYPES = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ],
}


@dataclass(frozen=True)
class TransferAuthorization:
    payer: str
    pay_to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: str  # 0x + 64 hex

    def as_payload(self) -> dict[str, str]:
        return {
            "from": self.payer,
            "to": self.pay_to,
            "value": str(self.value),
            "validAfter": str(self.valid_after),
            "validBefore": str(self.valid_before),
            "nonce": self.nonce,
        }


def derive_nonce(intent_id: str) -> str:
    return "0x" + keccak(b"paywarden/eip3009/" + intent_id.encode()).hex()


def validity_window(now_unix: int, max_timeout_seconds: int | None) -> tuple[int, int]:
    """(validAfter, validBefore): a minute of skew before now, and at most 300 s in all."""
    valid_after = now_unix - CLOCK_SKEW_SECONDS
    wanted = max_timeout_seconds if max_timeout_seconds is not None else 60
    ahead = min(max(wanted, MIN_VALIDITY_SECONDS), MAX_WINDOW_SECONDS - CLOCK_SKEW_SECONDS)
    return valid_after, now_unix + ahead


def build_authorization(
    selection: Selection, *, payer: str, intent_id: str, valid_after: int, valid_before: int
) -> TransferAuthorization:
    if valid_before - valid_after > MAX_WINDOW_SECONDS:
        raise ValueError("the authorisation window may not exceed 300 seconds")
    return TransferAuthorization(
        payer=payer,
        pay_to=selection.pay_to,
        value=selection.amount_atomic,
        valid_after=valid_after,
        valid_before=valid_before,
        nonce=derive_nonce(intent_id),
    )


def typed_data(selection: Selection, authorization: TransferAuthorization) -> dict[str, Any]:
    return transfer_typed_data(
        authorization,
        domain_name=selection.domain_name,
        domain_version=selection.domain_version,
        chain_id=selection.chain_id,
        verifying_contract=selection.asset,
    )


def transfer_typed_data(
    authorization: TransferAuthorization,
    *,
    domain_name: str,
    domain_version: str,
    chain_id: int,
    verifying_contract: str,
) -> dict[str, Any]:
    """The EIP-712 typed data of an EIP-3009 `TransferWithAuthorization`: what a wallet signs."""
    return {
        "types": TRANSFER_WITH_AUTHORIZATION_TYPES,
        "primaryType": "TransferWithAuthorization",
        "domain": {
            "name": domain_name,
            "version": domain_version,
            "chainId": chain_id,
            "verifyingContract": verifying_contract,
        },
        "message": {
            "from": authorization.payer,
            "to": authorization.pay_to,
            "value": authorization.value,
            "validAfter": authorization.valid_after,
            "validBefore": authorization.valid_before,
            "nonce": bytes.fromhex(authorization.nonce[2:]),
        },
    }


def encode_payment_signature(
    challenge: Challenge,
    selection: Selection,
    authorization: TransferAuthorization,
    signature: str,
    *,
    identifier: str | None = None,
) -> str:
    """The v2 `PAYMENT-SIGNATURE` value: base64 JSON echoing the seller's own offer verbatim, with
    the payment's identifier when the seller declared the payment-identifier extension."""
    payload: dict[str, Any] = {
        "x402Version": 2,
        "accepted": selection.offer.raw,
        "payload": {"signature": signature, "authorization": authorization.as_payload()},
    }
    if challenge.resource is not None:
        payload["resource"] = challenge.resource
    extensions = payload_extensions(challenge, identifier) if identifier is not None else None
    if extensions is not None:
        payload["extensions"] = extensions
    return base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def encode_x_payment(selection: Selection, authorization: TransferAuthorization, signature: str) -> str:
    """The v1 `X-PAYMENT` value: scheme and the seller's own network name at the top level."""
    payload: dict[str, Any] = {
        "x402Version": 1,
        "scheme": selection.offer.scheme,
        "network": selection.offer.raw.get("network"),
        "payload": {"signature": signature, "authorization": authorization.as_payload()},
    }
    return base64.b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode()


def payment_header_name(x402_version: int) -> str:
    """The header that carries a signed payment in this protocol version."""
    return X_PAYMENT if x402_version == 1 else PAYMENT_SIGNATURE


def payment_header(
    challenge: Challenge,
    selection: Selection,
    authorization: TransferAuthorization,
    signature: str,
    *,
    identifier: str | None = None,
) -> tuple[str, str]:
    """(header name, value) carrying the signed payment, in the challenge's own protocol version;
    `identifier` travels only where the seller declared the payment-identifier extension (v2)."""
    name = payment_header_name(challenge.x402_version)
    if challenge.x402_version == 1:
        return name, encode_x_payment(selection, authorization, signature)
    return name, encode_payment_signature(
        challenge, selection, authorization, signature, identifier=identifier
    )


# Circle's FiatTokenV2 signature with (v, r, s): every USDC version has this one.
TRANSFER_WITH_AUTHORIZATION = (
    "0x"
    + keccak(
        b"transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
    ).hex()[:8]
)


def _word(value: int | bytes) -> str:
    raw = value if isinstance(value, bytes) else value.to_bytes(32, "big")
    return raw.rjust(32, b"\x00").hex()


def _address(address: str) -> bytes:
    return bytes.fromhex(address.lower().removeprefix("0x"))


def transfer_calldata(authorization: TransferAuthorization, signature: str) -> str:
    """The token call that uses a signed authorisation: `transferWithAuthorization(from, to, value,
    validAfter, validBefore, nonce, v, r, s)`, for whoever sends it (a sweep's gas payer)."""
    raw = bytes.fromhex(signature.removeprefix("0x"))
    if len(raw) != 65:
        raise ValueError("a signature is 65 bytes")
    r, s, v = raw[:32], raw[32:64], raw[64]
    v = v + 27 if v < 27 else v
    return TRANSFER_WITH_AUTHORIZATION + "".join(
        _word(part)
        for part in (
            _address(authorization.payer),
            _address(authorization.pay_to),
            authorization.value,
            authorization.valid_after,
            authorization.valid_before,
            bytes.fromhex(authorization.nonce.removeprefix("0x")),
            v,
            r,
            s,
        )
    )
