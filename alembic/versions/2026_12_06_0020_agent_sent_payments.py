"""Payments an agent sends itself (pay_x402): who sent each payment, and the header handed over,
sealed with the master key.

Revision ID: 20261206_0020
Revises: 20261204_0019
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0020"
down_revision: str | None = "20261204_0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    # Every payment made before this one was sent by Paywarden itself.
    sa.Column("sent_by", sa.String(length=10), nullable=False, server_default="paywarden"),
    sa.Column("payment_header_sealed", sa.LargeBinary(), nullable=True),
    sa.Column("payment_header_key_id", sa.String(length=16), nullable=True),
)


def upgrade() -> None:
    # Plain ADD COLUMN on both databases: no table is rebuilt.
    for column in _COLUMNS:
        op.add_column("payment_intents", column)


def downgrade() -> None:
    # Dropped in place, as the receipts' columns are: a batch rebuild of `payment_intents` fails
    # once approvals refer to its rows, and these columns carry no index or constraint.
    for column in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE payment_intents DROP COLUMN {column.name}")
