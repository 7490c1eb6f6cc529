"""What each payment keeps of its receipt: the digest of the terms paid, the digest, size and
media type of the body served (never the body), and the seller's settlement header as received.

Revision ID: 20261204_0017
Revises: 20261204_0016
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0017"
down_revision: str | None = "20261204_0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    sa.Column("terms_sha256", sa.String(length=64), nullable=True),
    sa.Column("body_sha256", sa.String(length=64), nullable=True),
    sa.Column("body_bytes", sa.BigInteger(), nullable=True),
    sa.Column("body_truncated", sa.Boolean(), nullable=True),
    sa.Column("content_type", sa.String(length=80), nullable=True),
    sa.Column("payment_response", sa.Text(), nullable=True),
)


def upgrade() -> None:
    # Plain ADD COLUMN on both databases: no table is rebuilt.
    for column in _COLUMNS:
        op.add_column("payment_intents", column)


def downgrade() -> None:
    # Dropped in place (SQLite 3.35 and later do): a batch rebuild of `payment_intents` fails once
    # approvals refer to its rows, and these columns carry no index or constraint.
    for column in reversed(_COLUMNS):
        op.execute(f"ALTER TABLE payment_intents DROP COLUMN {column.name}")
