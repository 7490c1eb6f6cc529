"""The `local_key` signer: a key Paywarden holds, sealed with the master key at rest."""

from __future__ import annotations

from typing import Any

from server.signers.base import SignerError


class LocalKeySigner:
    mode = "local_key"

    def __init__(self, private_key: bytes) -> None:
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

    async def sign_typed_data(self, typed: dict[str, Any]) -> str:
        signed = self._account.sign_typed_data(full_message=typed)
        return "0x" + bytes(signed.signature).hex()
