"""The values a signer is handed and hands back: no rows, no services."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from server.x402.transfer_authorization import TransferAuthorization


class IntentKind(StrEnum):
    PAYMENT = "payment"  # a purchase: the payee is the seller's
    SWEEP = "sweep"  # a retired wallet's balance moving to its agent's current wallet


@dataclass(frozen=True)
class AuthorisedIntent:
    """A payment intent (or a sweep) as the ledger recorded it: the only thing a signer signs for.

    A sweep also names `current_wallet`, the agent's current wallet read when it is signed (not
    from the sweep's own record): the only payee a sweep may have."""

    id: str
    status: str
    network: str
    asset: str
    pay_to: str
    amount_atomic: int
    payer: str
    nonce: str
    valid_after: int
    valid_before: int
    kind: IntentKind = IntentKind.PAYMENT
    current_wallet: str | None = None


@dataclass(frozen=True)
class TransferRequest:
    """The transfer the seller's offer asks for, checked against the intent, never trusted alone.
    `domain_name` and `domain_version` are the token's EIP-712 domain (they only make a signature
    valid or not for that contract; the contract itself is checked)."""

    network: str
    asset: str
    pay_to: str
    amount_atomic: int
    domain_name: str
    domain_version: str


@dataclass(frozen=True)
class SignedTransfer:
    """What was signed, exactly, and its 65-byte signature as 0x-prefixed hex."""

    authorization: TransferAuthorization
    signature: str
