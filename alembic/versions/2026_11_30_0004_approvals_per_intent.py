"""An intent may have several approvals in turn: a retry that meets a hold reason its approval did
not cover supersedes it with a new one. The one-approval-per-intent constraint becomes an index.

Revision ID: 20261130_0004
Revises: 20261129_0003
Create Date: 2026-11-30
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261130_0004"
down_revision: str | None = "20261129_0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_approvals_intent_id"), type_="unique")
        batch_op.create_index(batch_op.f("ix_approvals_intent_id"), ["intent_id"], unique=False)


def downgrade() -> None:
    # Superseded approvals cannot survive the old constraint: keep the one in force per intent.
    op.execute("DELETE FROM approvals WHERE status = 'superseded'")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approvals_intent_id"))
        batch_op.create_unique_constraint(batch_op.f("uq_approvals_intent_id"), ["intent_id"])
