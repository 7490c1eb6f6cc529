"""Audit heads: each organisation's newest event (seq and hash) in a row of its own, so appending
to the chain locks that row at the end of a transaction instead of the organisation for all of it.

Revision ID: 20261206_0023
Revises: 20261206_0022
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0023"
down_revision: str | None = "20261206_0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "audit_heads",
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"]),
        sa.PrimaryKeyConstraint("org_id"),
    )
    # Every chain's newest event as it stands; an organisation without events gets its row with
    # its first event.
    op.execute(
        "INSERT INTO audit_heads (org_id, seq, hash) "
        "SELECT e.org_id, e.seq, e.hash FROM audit_events e "
        "WHERE e.seq = (SELECT MAX(m.seq) FROM audit_events m WHERE m.org_id = e.org_id)"
    )


def downgrade() -> None:
    op.drop_table("audit_heads")
