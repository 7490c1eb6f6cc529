"""The only code that opens a sealed wallet key or an organisation's sealed CDP credentials.
Nothing outside server/signers/ may import it (an import contract in pyproject.toml), and
`MasterKey.open` refuses both contexts, so their plaintext exists only inside a signer."""

from __future__ import annotations

from server.kit.crypto import SIGNER_ONLY_CONTEXT_PREFIX, MasterKey


def wallet_context(wallet_id: str) -> str:
    """What a wallet's key is sealed under: bound to the wallet, so it opens for no other."""
    return f"{SIGNER_ONLY_CONTEXT_PREFIX}{wallet_id}"


def cdp_credentials_context(org_id: str) -> str:
    """What an organisation's CDP credentials are sealed under: bound to the organisation, and
    opened only by a signer (ids never hold a `/`, so no wallet id can take this context)."""
    return f"{SIGNER_ONLY_CONTEXT_PREFIX}cdp-credentials/{org_id}"


def seal_wallet_key(master: MasterKey, *, wallet_id: str, private_key: bytes) -> bytes:
    return master.seal(private_key, context=wallet_context(wallet_id))


def unseal_wallet_key(master: MasterKey, *, wallet_id: str, sealed: bytes) -> bytes:
    """The wallet's private key. Raises SealError for another key, wallet or tampered bytes."""
    return master._open_signer_secret(sealed, context=wallet_context(wallet_id))


def seal_cdp_credentials(master: MasterKey, *, org_id: str, plaintext: bytes) -> bytes:
    return master.seal(plaintext, context=cdp_credentials_context(org_id))


def unseal_cdp_credentials(master: MasterKey, *, org_id: str, sealed: bytes) -> bytes:
    """The organisation's CDP credentials. Raises SealError for another key, organisation or
    tampered bytes."""
    return master._open_signer_secret(sealed, context=cdp_credentials_context(org_id))
