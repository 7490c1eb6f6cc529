"""What the rest of Paywarden may ask of a sealed wallet key: seal one, check that the master key
opens one, or get a signer for it. None of these hands the key's plaintext back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from server.kit.clock import Clock
from server.kit.crypto import MasterKey, SealError
from server.signers.errors import SignerError
from server.signers.key_material import seal_wallet_key, unseal_wallet_key
from server.signers.local_key import LocalKeySigner


def seal_local_key(master: MasterKey, *, wallet_id: str, private_key: bytes) -> bytes:
    return seal_wallet_key(master, wallet_id=wallet_id, private_key=private_key)


@dataclass(frozen=True)
class GeneratedKey:
    address: str
    sealed: bytes  # sealed for the wallet it was made for


def generate_local_key(master: MasterKey, *, wallet_id: str) -> GeneratedKey:
    """A new secp256k1 key from the operating system's randomness, sealed at once for `wallet_id`:
    its plaintext exists only in this call."""
    from eth_account import Account

    account = Account.create()
    sealed = seal_wallet_key(master, wallet_id=wallet_id, private_key=bytes(account.key))
    return GeneratedKey(address=str(account.address), sealed=sealed)


def reseal_wallet_key(current: MasterKey, new: MasterKey, *, wallet_id: str, sealed: bytes) -> bytes:
    """The wallet's key sealed under `new` instead of `current` (the master key's rotation): the
    plaintext lives only in this call. Raises SealError when `current` does not open it."""
    return seal_wallet_key(
        new, wallet_id=wallet_id, private_key=unseal_wallet_key(current, wallet_id=wallet_id, sealed=sealed)
    )


def opens_wallet_key(master: MasterKey, *, wallet_id: str, sealed: bytes) -> bool:
    """Whether `master` opens this wallet's sealed key (the key itself is dropped at once)."""
    try:
        unseal_wallet_key(master, wallet_id=wallet_id, sealed=sealed)
    except SealError:
        return False
    return True


def local_key_signer(
    master: MasterKey,
    *,
    wallet_id: str,
    sealed: bytes,
    usdc_by_network: Mapping[str, str],
    clock: Clock,
) -> LocalKeySigner:
    try:
        private_key = unseal_wallet_key(master, wallet_id=wallet_id, sealed=sealed)
    except SealError as exc:
        raise SignerError("the wallet key does not open with this master key") from exc
    return LocalKeySigner(private_key, usdc_by_network=usdc_by_network, clock=clock)
