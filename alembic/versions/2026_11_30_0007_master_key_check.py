"""The master key's check value, so a process started with another key refuses to run.

Revision ID: 20261130_0007
Revises: 20261130_0006
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_0007"
down_revision: str | None = "20261130_0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "master_key_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("check_value", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_master_key_checks")),
    )


def downgrade() -> None:
    op.drop_table("master_key_checks")
