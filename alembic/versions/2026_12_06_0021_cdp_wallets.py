"""Coinbase CDP wallets: an organisation's sealed CDP credentials, and each `cdp` wallet's own
policy at CDP (its id, what CDP last accepted, and a failure to send it, retried).

Revision ID: 20261206_0021
Revises: 20261206_0020
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0021"
down_revision: str | None = "20261206_0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ORGANIZATION_COLUMNS = ("cdp_connected_at", "cdp_credentials_key_id", "cdp_credentials_sealed")
_WALLET_COLUMNS = (
    "cdp_policy_retry_at",
    "cdp_policy_failures",
    "cdp_policy_error",
    "cdp_policy_synced_at",
    "cdp_policy_version",
    "cdp_policy_digest",
    "cdp_policy_id",
)


def upgrade() -> None:
    # Plain ADD COLUMN on both databases: no table is rebuilt.
    op.add_column("organizations", sa.Column("cdp_credentials_sealed", sa.LargeBinary(), nullable=True))
    op.add_column("organizations", sa.Column("cdp_credentials_key_id", sa.String(length=16), nullable=True))
    op.add_column("organizations", sa.Column("cdp_connected_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("wallets", sa.Column("cdp_policy_id", sa.String(length=64), nullable=True))
    op.add_column("wallets", sa.Column("cdp_policy_digest", sa.String(length=64), nullable=True))
    op.add_column("wallets", sa.Column("cdp_policy_version", sa.Integer(), nullable=True))
    op.add_column("wallets", sa.Column("cdp_policy_synced_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("wallets", sa.Column("cdp_policy_error", sa.String(length=60), nullable=True))
    op.add_column(
        "wallets", sa.Column("cdp_policy_failures", sa.Integer(), nullable=False, server_default="0")
    )
    op.add_column("wallets", sa.Column("cdp_policy_retry_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # Dropped in place (SQLite 3.35 and later do): a batch rebuild fails once other tables' rows
    # refer to these tables, and these columns carry no index or constraint.
    for column in _WALLET_COLUMNS:
        op.drop_column("wallets", column)
    for column in _ORGANIZATION_COLUMNS:
        op.drop_column("organizations", column)
