"""What every signer offers: an address, and a signature of a payment intent the ledger authorised.

There is no method that signs arbitrary typed data. A signer is handed the intent as the ledger
recorded it and the transfer the seller's offer asks for; it checks one against the other and
against the network's configured USDC (server/signers/authorisation.py), builds the EIP-3009
`TransferWithAuthorization` itself, and signs that, or raises `SignRefused`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

from server.kit.clock import Clock
from server.signers.authorisation import authorised_transfer
from server.signers.intents import AuthorisedIntent, SignedTransfer, TransferRequest


class Signer(Protocol):
    mode: ClassVar[str]

    @property
    def address(self) -> str: ...

    async def sign_payment(self, intent: AuthorisedIntent, request: TransferRequest) -> SignedTransfer:
        """Sign the intent's EIP-3009 transfer, or raise SignRefused (nothing signed)."""
        ...


class PaymentSigner(ABC):
    """The checks every backend shares; a backend adds only how its key signs the typed data."""

    mode: ClassVar[str]

    def __init__(self, *, usdc_by_network: Mapping[str, str], clock: Clock) -> None:
        self._usdc_by_network = dict(usdc_by_network)
        self._clock = clock

    @property
    @abstractmethod
    def address(self) -> str: ...

    async def sign_payment(self, intent: AuthorisedIntent, request: TransferRequest) -> SignedTransfer:
        authorization, typed = authorised_transfer(
            intent,
            request,
            payer=self.address,
            usdc_by_network=self._usdc_by_network,
            now_unix=int(self._clock.now().timestamp()),
        )
        return SignedTransfer(authorization, await self._sign_typed_data(typed))

    @abstractmethod
    async def _sign_typed_data(self, typed: dict[str, Any]) -> str:
        """The backend's signature of typed data authorised_transfer built (never a caller's)."""
