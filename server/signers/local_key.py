"""The `local_key` signer: a key Paywarden holds, sealed with the master key at rest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server.kit.clock import Clock
from server.signers.base import PaymentSigner
from server.signers.errors import SignerError


class LocalKeySigner(PaymentSigner):
    mode = "local_key"

    def __init__(self, private_key: bytes, *, usdc_by_network: Mapping[str, str], clock: Clock) -> None:
        super().__init__(usdc_by_network=usdc_by_network, clock=clock)
        # Loaded here, not with the module: a command that never signs does not pay half a second
        # for it (a server loads it at start, server/app.py).
        from eth_account import Account

        try:
            self._account = Account.from_key(private_key)
        except (ValueError, TypeError) as exc:
            raise SignerError("the wallet key is not a valid secp256k1 key") from exc

    @property
    def address(self) -> str:
        return str(self._account.address)

    async def _sign_typed_data(self, typed: dict[str, Any]) -> str:
        signed = self._account.sign_typed_data(full_message=typed)
        return "0x" + bytes(signed.signature).hex()
