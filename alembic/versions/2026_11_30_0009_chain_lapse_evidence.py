"""Chain evidence on a payment intent that its sent authorisation can no longer settle: the block
(and its timestamp) that proves it. Caps stop counting a failed or expired payment only on it.

Revision ID: 20261130_0009
Revises: 20261130_0008
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_0009"
down_revision: str | None = "20261130_0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lapse_block", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("lapse_block_time", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.drop_column("lapse_block_time")
        batch_op.drop_column("lapse_block")
