"""Which master key this database belongs to.

A database keeps the check value of its master key (an HKDF derivation: it identifies the key
without revealing it). Every process compares its key with it before it does anything else, so a
process started with another key (another key file, another working directory, a mistyped
`PAYWARDEN_MASTER_KEY`) stops with one line instead of failing at its first signature or writing
audit events no one can verify. A database that already holds sealed wallet keys but no check
value (set up before the check existed) adopts the key only if it opens one of them.

The audit chain's key is derived from the master key the database was set up with; the first
rotation of the master key (server/wallets/rotation.py) keeps that same chain key, sealed with the
new master key, so every event ever written keeps verifying (docs/decisions.md).
"""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session

from server.audit.hash_chain import chain_key
from server.kit.clock import Clock
from server.kit.crypto import (
    MasterKey,
    MasterKeyError,
    MasterKeyMissing,
    SealError,
    key_id_of,
    load_or_create_master_key_file,
    pending_master_key_file,
)
from server.kit.db import Database
from server.kit.migrations import has_table
from server.models import MasterKeyCheck
from server.settings import Settings
from server.signers.loading import opens_wallet_key
from server.wallets.repository import MasterKeyCheckRepository, SealedValueRepository
from server.wallets.sealed import AUDIT_CHAIN_KEY, secret_context


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
        if wallet is not None:
            wallet_id, sealed = wallet
            if not opens_wallet_key(master, wallet_id=wallet_id, sealed=sealed):
                raise mismatch(name)
        if not with_check:
            return
        if checks.add_unique(MasterKeyCheck(id=1, check_value=master.check_value(), created_at=now)):
            return
        stored = checks.stored()  # another process recorded it in the meantime
        assert stored is not None
    if stored.check_value != master.check_value():
        raise mismatch(name)


def require_current_key(session: Session, *, key_id: str) -> None:
    """Raise MasterKeyMismatch unless `key_id` names the database's key, before a value sealed with
    it is written: a process still running with the key a rotation replaced seals nothing more.
    The check value's row stays share-locked to the commit, so a rotation cannot slip in between."""
    stored = MasterKeyCheckRepository(session).shared()
    if stored is not None and key_id_of(stored.check_value) != key_id:
        raise MasterKeyMismatch(
            "the master key this process was started with is no longer this database's (it was "
            "rotated); restart the process with the database's key"
        )


def audit_chain_key(session: Session, *, master: MasterKey, with_secrets: bool = True) -> bytes:
    """The key of the audit hash chain: sealed in the database once the master key was rotated,
    else derived from the master key (`with_secrets` False on a schema older than the sealed
    secrets' table)."""
    stored = SealedValueRepository(session).secret(AUDIT_CHAIN_KEY) if with_secrets else None
    if stored is None:
        return chain_key(master)
    try:
        return master.open(stored.sealed, context=secret_context(AUDIT_CHAIN_KEY))
    except SealError:
        raise MasterKeyError(
            "the audit chain's key does not open with the master key although its check value "
            "matches: the database was altered"
        ) from None


def _refuse_with_pending_rotation(settings: Settings) -> None:
    """A rotation that committed but stopped before it put the new key file in place left that key
    beside the old file: say so, since it is the database's key now."""
    path = settings.master_key_file if settings.master_key is None else None
    if path is None:
        return
    pending = pending_master_key_file(path)
    if pending.exists():
        raise MasterKeyMismatch(
            f"the master key file {path} does not match this database's master key, and a rotation "
            f"left the new key in {pending}: move it over {path.name} (mv {pending} {path})"
        )


def open_master_key(db: Database, settings: Settings, *, clock: Clock, may_create: bool = True) -> MasterKey:
    """The master key this process may use, checked against the database before anything else.

    Raises MasterKeyError with one line naming the key when it is not the database's own. Without
    PAYWARDEN_MASTER_KEY the key file next to the SQLite database is created on first start, and
    never for a database that already holds a key check value or sealed wallet keys: a new key
    could open none of them. Works on any schema (before `migrate` too): what the schema does not
    have yet, it does not check.
    """
    tables = has_table(db, "wallets")
    with_check = has_table(db, "master_key_checks")
    with_secrets = has_table(db, "sealed_secrets")
    try:
        master = settings.master
    except MasterKeyMissing:
        path = settings.master_key_file
        assert path is not None  # without a file to keep it in, settings.master says so itself
        if not may_create and not path.exists():
            raise MasterKeyMissing(
                f"the master key file {path} does not exist: restore it, set PAYWARDEN_MASTER_KEY, "
                "or run `paywarden migrate` for a new database"
            ) from None
        if tables:
            with db.read() as session:
                sealed = holds_sealed_secrets(session, with_check=with_check)
            # A process starting at the same moment may have just made the file, and used it.
            if sealed and not path.exists():
                raise MasterKeyMissing(
                    f"the master key file {path} does not exist, and this database holds keys "
                    "sealed with a master key: restore that file or set PAYWARDEN_MASTER_KEY"
                ) from None
        master = load_or_create_master_key_file(path)
    audit_key = chain_key(master)
    if tables:
        with db.write() as session:
            try:
                check_master_key(
                    session,
                    master=master,
                    name=settings.master_key_name,
                    now=clock.now(),
                    with_check=with_check,
                )
            except MasterKeyMismatch:
                _refuse_with_pending_rotation(settings)
                raise
            audit_key = audit_chain_key(session, master=master, with_secrets=with_secrets)
    db.audit_key = audit_key  # only now can anything be audited
    return master
