"""An organisation's own Slack webhook for its approval notifications: sealed with the master key,
and a masked form of it the settings page shows once it is saved.

Revision ID: 20261204_0015
Revises: 20261204_0014
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0015"
down_revision: str | None = "20261204_0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases: the table is not rebuilt.
    op.add_column("organizations", sa.Column("slack_webhook_sealed", sa.LargeBinary(), nullable=True))
    op.add_column("organizations", sa.Column("slack_webhook_masked", sa.String(length=80), nullable=True))


def downgrade() -> None:
    # A plain DROP COLUMN too (SQLite 3.35 and newer): rebuilding the table other tables point at
    # would fail its foreign keys once an organisation exists.
    op.execute("ALTER TABLE organizations DROP COLUMN slack_webhook_masked")
    op.execute("ALTER TABLE organizations DROP COLUMN slack_webhook_sealed")
