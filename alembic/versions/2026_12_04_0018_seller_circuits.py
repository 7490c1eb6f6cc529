"""The seller circuit breaker: an organisation's thresholds, and the hosts it has blocked.

Revision ID: 20261204_0018
Revises: 20261204_0017
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0018"
down_revision: str | None = "20261204_0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases, with defaults for the organisations that exist.
    op.add_column(
        "organizations", sa.Column("circuit_failures", sa.Integer(), nullable=False, server_default="3")
    )
    op.add_column(
        "organizations", sa.Column("circuit_window_hours", sa.Integer(), nullable=False, server_default="24")
    )
    op.create_table(
        "seller_circuits",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("open_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("cleared_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("cleared_by", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_seller_circuits_org_host", "seller_circuits", ["org_id", "host"])


def downgrade() -> None:
    op.drop_index("ix_seller_circuits_org_host", table_name="seller_circuits")
    op.drop_table("seller_circuits")
    # Plain DROP COLUMN (SQLite 3.35 and newer): other tables point at organisations.
    op.execute("ALTER TABLE organizations DROP COLUMN circuit_window_hours")
    op.execute("ALTER TABLE organizations DROP COLUMN circuit_failures")
