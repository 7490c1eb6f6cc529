"""What text that may hold a credential looks like: Paywarden's tokens, client secrets and master
key, 32-byte hex values shaped like a wallet's private key, and PEM private keys. Input that
matches is refused before it is sent, stored or shown to anyone."""

from __future__ import annotations

import re

_PAYWARDEN_SECRETS = (
    r"(pw_(at|rt|cs)_[A-Za-z0-9_-]{16,})"  # Paywarden tokens and client secrets
    r"|(pwmk_[A-Za-z0-9_-]{20,})"  # the master key
)
PAYWARDEN_SECRET = re.compile(_PAYWARDEN_SECRETS)
CREDENTIAL_LIKE = re.compile(
    _PAYWARDEN_SECRETS
    + r"|((?<![0-9A-Za-z])(0x)?[0-9a-fA-F]{64}(?![0-9A-Za-z]))"  # shaped like a wallet private key
    r"|(-----BEGIN ([A-Z]+ )?PRIVATE KEY-----)"  # PEM keys (CDP API secrets among them)
)


def contains_credential(text: str, *, bearer: str | None = None) -> bool:
    """Whether `text` holds something shaped like a credential, or the caller's own token."""
    return bool((bearer and bearer in text) or CREDENTIAL_LIKE.search(text))


def contains_paywarden_secret(text: str, *, bearer: str | None = None) -> bool:
    """Whether `text` holds one of Paywarden's own secrets or the caller's own token: for text that
    may rightly carry 32-byte hex values (a transaction hash)."""
    return bool((bearer and bearer in text) or PAYWARDEN_SECRET.search(text))
