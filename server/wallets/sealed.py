"""Every value the database keeps sealed with the master key, in one place: where it lives, where
its key id is recorded, and the context (associated data) it is bound to.

Whatever seals or opens one of them takes its context from here, and the master key's rotation
(server/wallets/rotation.py) re-seals exactly what `SEALED_COLUMNS` and the sealed secrets list;
a test fails on a sealed column of the models that is missing here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqlmodel import SQLModel

from server.models import Organization, PendingChange, Wallet

AUDIT_CHAIN_KEY = "audit-chain-key"  # the sealed secret holding the audit chain's key


def wallet_context(wallet_id: str) -> str:
    return f"wallet:{wallet_id}"


def webhook_context(org_id: str) -> str:
    return f"slack-webhook:{org_id}"


def pending_result_context(change_id: str) -> str:
    return f"paywarden/pending-change-result/v1/{change_id}"


def secret_context(name: str) -> str:
    return f"paywarden/sealed-secret/v1/{name}"


@dataclass(frozen=True)
class SealedColumn:
    """A column holding a sealed value, the column naming its key, and how its context is made."""

    model: type[SQLModel]
    sealed: str
    key_id: str
    context: Callable[[Any], str]
    label: str  # what the rotation reports, plural

    def value(self, row: Any) -> bytes | None:
        found = getattr(row, self.sealed)
        return bytes(found) if found is not None else None


SEALED_COLUMNS: tuple[SealedColumn, ...] = (
    SealedColumn(Wallet, "sealed_secret", "sealed_key_id", lambda row: wallet_context(row.id), "wallet keys"),
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
)
