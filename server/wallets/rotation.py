"""Rotating the master key: every value sealed with it re-sealed under a new key, in one transaction.

What is re-sealed is what server/wallets/sealed.py lists (wallet keys, organisations' Slack
webhooks, pending changes' results) and the database's own sealed secrets; the audit chain's key
is kept, sealed under the new key (stored on the first rotation, when it was still derived from
the master key), so the chain written before the rotation verifies after it. The check value is
replaced in the same transaction: until it commits the old key is the database's and opens every
value; once it commits only the new key does, and the old one is refused like any other.

Keys derived from the master key for short-lived values (CSRF tokens, refresh-token successors,
an MCP approval state, the demo token) are not stored: they follow the new key by themselves
(docs/decisions.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from server.audit.service import record as audit
from server.kit.crypto import MasterKey, SealError
from server.kit.errors import PaywardenError
from server.models import MasterKeyCheck, SealedSecret
from server.wallets.master_key import audit_chain_key, mismatch
from server.wallets.repository import MasterKeyCheckRepository, SealedValueRepository
from server.wallets.sealed import AUDIT_CHAIN_KEY, SEALED_COLUMNS, secret_context

ROTATED_EVENT = "master_key.rotated"


class MasterKeyUnchanged(PaywardenError):
    code = "master_key_unchanged"
    message = "The new master key is the one in use: nothing was rotated."


class SealedValueUnreadable(PaywardenError):
    code = "sealed_value_unreadable"
    message = "A sealed value does not open with the master key in use: nothing was rotated."


class RotationIncomplete(PaywardenError):
    code = "master_key_rotation_incomplete"
    message = "A sealed value is not under the new master key after re-sealing: nothing was rotated."


@dataclass(frozen=True)
class Rotation:
    previous_key_id: str
    key_id: str
    resealed: dict[str, int]  # what was re-sealed, by kind (SealedColumn.label, and "sealed secrets")
    chain_key_stored: bool  # this rotation stored the audit chain's key (the first rotation)


def rotate_master_key(
    session: Session,
    *,
    current: MasterKey,
    new: MasterKey,
    actor: str,
    now: datetime,
    after_each: Callable[[int], None] | None = None,
) -> Rotation:
    """Re-seal every sealed value from `current` to `new` and make `new` the database's key.

    Never commits: the caller's unit of work is the one transaction, so an error anywhere (a value
    that does not open, a crash) leaves every value and the check value as they were. `after_each`
    is told how many values were re-sealed after each one (tests inject a crash with it).
    """
    if new.check_value() == current.check_value():
        raise MasterKeyUnchanged()
    checks = MasterKeyCheckRepository(session)
    # Locked to the commit: no other process starts with either key meanwhile. A database that has
    # not recorded its key yet gets the new key's check value, once every value opened with `current`.
    stored = checks.locked()
    if stored is not None and stored.check_value != current.check_value():
        raise mismatch("the master key in use")
    values = SealedValueRepository(session)
    resealed: dict[str, int] = {}
    done = 0

    chain_key = audit_chain_key(session, master=current)
    secrets = list(values.secrets())
    chain_key_stored = all(secret.name != AUDIT_CHAIN_KEY for secret in secrets)
    if chain_key_stored:
        secrets.append(SealedSecret(name=AUDIT_CHAIN_KEY, sealed=b"", key_id="", created_at=now))
    for secret in secrets:
        context = secret_context(secret.name)
        plaintext = chain_key if secret.name == AUDIT_CHAIN_KEY else _open(current, secret)
        secret.sealed, secret.key_id = new.seal(plaintext, context=context), new.key_id
        values.add(secret)
        done += 1
        if after_each is not None:
            after_each(done)
    resealed["sealed secrets"] = len(secrets)

    for column in SEALED_COLUMNS:
        rows = values.rows_sealed_in(column)
        for row in rows:
            sealed = column.value(row)
            assert sealed is not None  # rows_sealed_in reads only rows that hold one
            try:
                resealed_value = column.resealed(current, new, row, sealed)
            except SealError:
                raise SealedValueUnreadable(table=column.model.__tablename__, column=column.sealed) from None
            setattr(row, column.sealed, resealed_value)
            setattr(row, column.key_id, new.key_id)
            session.add(row)
            session.flush()
            done += 1
            if after_each is not None:
                after_each(done)
        resealed[column.label] = len(rows)
        if values.count_sealed_in(column, other_than=new.key_id):
            raise RotationIncomplete()

    if stored is None:
        stored = MasterKeyCheck(id=1, check_value=new.check_value(), created_at=now)
    stored.check_value = new.check_value()
    checks.add(stored)
    for org_id in values.organization_ids():
        audit(
            session,
            org_id=org_id,
            type=ROTATED_EVENT,
            actor=actor,
            data={"keyId": new.key_id, "previousKeyId": current.key_id},
            now=now,
        )
    return Rotation(
        previous_key_id=current.key_id,
        key_id=new.key_id,
        resealed=resealed,
        chain_key_stored=chain_key_stored,
    )


def _open(master: MasterKey, secret: SealedSecret) -> bytes:
    try:
        return master.open(secret.sealed, context=secret_context(secret.name))
    except SealError:
        raise SealedValueUnreadable(table="sealed_secrets", column=secret.name) from None
