"""Sudo and pending changes: a step-up may now be a sudo (a session's widening changes for a few
minutes) or the confirmation of one pending change, a change asked for with an admin token that
widens authority and waits for a member's passkey.

Revision ID: 20261204_0014
Revises: 20261202_0013
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0014"
down_revision: str | None = "20261202_0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pending_changes",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("asked_by", sa.String(length=80), nullable=False),
        sa.Column("subject_id", sa.String(length=40), nullable=False),
        sa.Column("change_json", sa.Text(), nullable=False),
        sa.Column("change_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("confirmed_by", sa.String(length=40), nullable=True),
        sa.Column("result_sealed", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(
            ["confirmed_by"], ["members.id"], name=op.f("fk_pending_changes_confirmed_by_members")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_pending_changes_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pending_changes")),
    )
    with op.batch_alter_table("pending_changes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_pending_changes_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_pending_changes_org_id"), ["org_id"], unique=False)
    with op.batch_alter_table("step_ups", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pending_change_id", sa.String(length=40), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_step_ups_pending_change_id_pending_changes"),
            "pending_changes",
            ["pending_change_id"],
            ["id"],
        )


def downgrade() -> None:
    with op.batch_alter_table("step_ups", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_step_ups_pending_change_id_pending_changes"), type_="foreignkey"
        )
        batch_op.drop_column("pending_change_id")
    op.execute("DELETE FROM step_ups WHERE action IN ('sudo', 'confirm_change')")
    with op.batch_alter_table("pending_changes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_pending_changes_org_id"))
        batch_op.drop_index(batch_op.f("ix_pending_changes_expires_at"))
    op.drop_table("pending_changes")
