"""What every signer offers: an address and EIP-712 signatures of typed data it is handed."""

from __future__ import annotations

from typing import Any, Protocol


class SignerError(Exception):
    """The signer could not produce a signature; nothing was signed."""


class Signer(Protocol):
    mode: str

    @property
    def address(self) -> str: ...

    async def sign_typed_data(self, typed: dict[str, Any]) -> str:
        """Return the 65-byte signature as 0x-prefixed hex."""
        ...
