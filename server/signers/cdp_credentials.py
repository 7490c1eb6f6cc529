"""An organisation's Coinbase CDP credentials: the API key's id and secret, and the wallet secret.

They are a wallet key in all but name (whoever holds them can ask CDP to sign for the
organisation's accounts), so they are sealed like one: under a context only the signers open
(server/signers/key_material.py). This value never prints its secrets, in a log line or a traceback.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field

from server.signers.errors import InvalidCdpCredentials

MAX_FIELD = 4096  # a PEM key with its header is well under 1 KiB


@dataclass(frozen=True)
class CdpCredentials:
    api_key_id: str
    api_key_secret: str = field(repr=False)
    wallet_secret: str = field(repr=False)

    def encode(self) -> bytes:
        """The plaintext that is sealed."""
        return json.dumps(
            {
                "apiKeyId": self.api_key_id,
                "apiKeySecret": self.api_key_secret,
                "walletSecret": self.wallet_secret,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, plaintext: bytes) -> CdpCredentials:
        document = json.loads(plaintext)
        return cls(document["apiKeyId"], document["apiKeySecret"], document["walletSecret"])


def credentials_from_text(api_key_id: str, api_key_secret: str, wallet_secret: str) -> CdpCredentials:
    """The three values as a person pasted them, checked the way CDP's SDK reads them: a key id, an
    API key secret it can sign a request with, and a wallet secret that is a DER key in base64.
    Raises InvalidCdpCredentials (its `reason` the field at fault), never echoing a secret."""
    key_id = api_key_id.strip()
    # A PEM key pasted into one line of a variable keeps its newlines as `\n`: the SDK reads both.
    secret = api_key_secret.strip()
    wallet = wallet_secret.strip()
    for name, value in (("apiKeyId", key_id), ("apiKeySecret", secret), ("walletSecret", wallet)):
        if not value or len(value) > MAX_FIELD or not value.replace("\n", "").isprintable():
            raise InvalidCdpCredentials(reason=name)
    # Loaded here, not with the module: the SDK takes seconds to import (docs/performance.md).
    from cdp.auth.utils.jwt import JwtOptions, WalletJwtOptions, generate_jwt, generate_wallet_jwt

    try:
        generate_jwt(
            JwtOptions(
                api_key_id=key_id,
                api_key_secret=secret,
                request_method="GET",
                request_host="api.cdp.coinbase.com",
                request_path="/platform/v2/evm/accounts",
            )
        )
    except ValueError:
        raise InvalidCdpCredentials(reason="apiKeySecret") from None
    try:
        base64.b64decode(wallet, validate=True)
        generate_wallet_jwt(
            WalletJwtOptions(
                wallet_auth_key=wallet,
                request_method="POST",
                request_host="api.cdp.coinbase.com",
                request_path="/platform/v2/evm/accounts",
                request_data={},
            )
        )
    except (ValueError, binascii.Error):
        raise InvalidCdpCredentials(reason="walletSecret") from None
    return CdpCredentials(key_id, secret, wallet)
