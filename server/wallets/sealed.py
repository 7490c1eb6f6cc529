"""Every value the database keeps sealed with the master key, in one place: where it lives, where
its key id is recorded, and the context (associated data) it is bound to.

Whatever seals or opens one of them takes its context from here (or, for wallet keys and CDP
credentials, which open only in the signers, from server/signers/key_material.py), and the master
key's rotation
(server/wallets/rotation.py) re-seals exactly what `SEALED_COLUMNS` and the sealed secrets list;
a test fails on a sealed column of the models that is missing here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlmodel import SQLModel

from server.kit.crypto import MasterKey
from server.models import Organization, PaymentIntent, PendingChange, Wallet
from server.signers.loading import reseal_cdp_credentials, reseal_wallet_key

AUDIT_CHAIN_KEY = "audit-chain-key"  # the sealed secret holding the audit chain's key


def webhook_context(org_id: str) -> str:
    return f"slack-webhook:{org_id}"


def pending_result_context(change_id: str) -> str:
    return f"paywarden/pending-change-result/v1/{change_id}"


def payment_header_context(intent_id: str) -> str:
    return f"paywarden/payment-header/v1/{intent_id}"


def secret_context(name: str) -> str:
    return f"paywarden/sealed-secret/v1/{name}"


def _reseal_wallet_key(current: MasterKey, new: MasterKey, row: Any, sealed: bytes) -> bytes:
    # A wallet key opens only inside the signers (server/signers/key_material.py).
    return reseal_wallet_key(current, new, wallet_id=row.id, sealed=sealed)


def _reseal_cdp_credentials(current: MasterKey, new: MasterKey, row: Any, sealed: bytes) -> bytes:
    # CDP credentials open only inside the signers too: they can have CDP sign for the organisation.
    return reseal_cdp_credentials(current, new, org_id=row.id, sealed=sealed)


@dataclass(frozen=True)
class SealedColumn:
    """A column holding a sealed value, the column naming its key, and either the context it is
    sealed under (`context`) or, for a value that opens only in the signers, how they re-seal it
    (`reseal`): its context is theirs alone (server/signers/key_material.py)."""

    model: type[SQLModel]
    sealed: str
    key_id: str
    context: Callable[[Any], str] | None
    label: str  # what the rotation reports, plural
    reseal: Callable[[MasterKey, MasterKey, Any, bytes], bytes] | None = None

    def resealed(self, current: MasterKey, new: MasterKey, row: Any, sealed: bytes) -> bytes:
        """The value sealed under `new`; SealError when `current` does not open it."""
        if self.reseal is not None:
            return self.reseal(current, new, row, sealed)
        assert self.context is not None  # a column has one or the other
        context = self.context(row)
        return new.seal(current.open(sealed, context=context), context=context)

    def value(self, row: Any) -> bytes | None:
        found = getattr(row, self.sealed)
        return bytes(found) if found is not None else None


SEALED_COLUMNS: tuple[SealedColumn, ...] = (
    SealedColumn(Wallet, "sealed_secret", "sealed_key_id", None, "wallet keys", reseal=_reseal_wallet_key),
    SealedColumn(
        Organization,
        "cdp_credentials_sealed",
        "cdp_credentials_key_id",
        None,
        "CDP credentials",
        reseal=_reseal_cdp_credentials,
    ),
    SealedColumn(
        Organization,
        "slack_webhook_sealed",
        "slack_webhook_key_id",
        lambda row: webhook_context(row.id),
        "Slack webhooks",
    ),
    SealedColumn(
        PendingChange,
        "result_sealed",
        "result_key_id",
        lambda row: pending_result_context(row.id),
        "pending change results",
    ),
    SealedColumn(
        PaymentIntent,
        "payment_header_sealed",
        "payment_header_key_id",
        lambda row: payment_header_context(row.id),
        "payment headers handed to agents",
    ),
)
