"""What the rest of Paywarden may ask of a sealed wallet key or sealed CDP credentials: seal them,
re-seal them under a new master key, check that the master key opens a key, or get a signer (or,
for CDP, the organisation's accounts and policies) built on them. None of these hands the
plaintext back."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from server.kit.clock import Clock
from server.kit.crypto import MasterKey, SealError
from server.signers.cdp import CdpSigner
from server.signers.cdp_api import CdpAccounts, CdpClientPool, CdpSession
from server.signers.cdp_credentials import CdpCredentials
from server.signers.errors import SignerError
from server.signers.key_material import (
    seal_cdp_credentials as _seal_credentials,
)
from server.signers.key_material import (
    seal_wallet_key,
    unseal_cdp_credentials,
    unseal_wallet_key,
)
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


def seal_cdp_credentials(master: MasterKey, *, org_id: str, credentials: CdpCredentials) -> bytes:
    return _seal_credentials(master, org_id=org_id, plaintext=credentials.encode())


def reseal_cdp_credentials(current: MasterKey, new: MasterKey, *, org_id: str, sealed: bytes) -> bytes:
    """The organisation's CDP credentials sealed under `new` instead of `current` (the master key's
    rotation). Raises SealError when `current` does not open them."""
    return _seal_credentials(
        new, org_id=org_id, plaintext=unseal_cdp_credentials(current, org_id=org_id, sealed=sealed)
    )


def _credentials(master: MasterKey, *, org_id: str, sealed: bytes) -> CdpCredentials:
    try:
        return CdpCredentials.decode(unseal_cdp_credentials(master, org_id=org_id, sealed=sealed))
    except SealError as exc:
        raise SignerError("the CDP credentials do not open with this master key") from exc


def cdp_accounts(
    master: MasterKey, *, org_id: str, sealed: bytes, api_url: str, pool: CdpClientPool | None = None
) -> CdpAccounts:
    """The organisation's accounts and policies at CDP, reached with its sealed credentials."""
    return CdpAccounts(_credentials(master, org_id=org_id, sealed=sealed), api_url=api_url, pool=pool)


def cdp_signer(
    master: MasterKey,
    *,
    org_id: str,
    sealed: bytes,
    address: str,
    api_url: str,
    usdc_by_network: Mapping[str, str],
    clock: Clock,
    pool: CdpClientPool | None = None,
) -> CdpSigner:
    session = CdpSession(_credentials(master, org_id=org_id, sealed=sealed), api_url=api_url, pool=pool)
    return CdpSigner(session, address=address, usdc_by_network=usdc_by_network, clock=clock)
