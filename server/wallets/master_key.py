"""Which master key this database belongs to.

A database keeps the check value of its master key (an HKDF derivation: it identifies the key
without revealing it). Every process compares its key with it before it does anything else, so a
process started with another key (another key file, another working directory, a mistyped
`PAYWARDEN_MASTER_KEY`) stops with one line instead of failing at its first signature or writing
audit events no one can verify. A database that already holds sealed wallet keys but no check
value (set up before the check existed) adopts the key only if it opens one of them.
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from server.kit.crypto import MasterKey, MasterKeyError, SealError
from server.models import MasterKeyCheck
from server.wallets.repository import MasterKeyCheckRepository


class MasterKeyMismatch(MasterKeyError):
    """The configured master key is not the one this database was set up with."""


def mismatch(name: str) -> MasterKeyMismatch:
    return MasterKeyMismatch(
        f"{name} does not match this database's master key (it was set up with another one); "
        "start with the key the database was set up with"
    )


def holds_sealed_secrets(session: Session, *, with_check: bool = True) -> bool:
    """Whether the database already depends on some master key: a check value or a sealed wallet.

    `with_check` is False on a schema older than the check value's table (before `migrate`)."""
    checks = MasterKeyCheckRepository(session)
    if with_check and checks.stored() is not None:
        return True
    return checks.any_sealed_wallet() is not None


def check_master_key(
    session: Session, *, master: MasterKey, name: str, now: datetime, with_check: bool = True
) -> None:
    """Raise MasterKeyMismatch unless `master` is this database's key; record it on first use.

    `name` says which key is meant (the variable, or the key file's path) in the error. On a schema
    older than the check value's table (`with_check` False) only the sealed wallets can tell.
    """
    checks = MasterKeyCheckRepository(session)
    stored = checks.stored() if with_check else None
    if stored is None:
        wallet = checks.any_sealed_wallet()
        if wallet is not None and wallet.sealed_secret is not None:
            try:
                master.open(wallet.sealed_secret, context=f"wallet:{wallet.id}")
            except SealError:
                raise mismatch(name) from None
        if not with_check:
            return
        if checks.add_unique(MasterKeyCheck(id=1, check_value=master.check_value(), created_at=now)):
            return
        stored = checks.stored()  # another process recorded it in the meantime
        assert stored is not None
    if stored.check_value != master.check_value():
        raise mismatch(name)
