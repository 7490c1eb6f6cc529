"""Step-ups: a fresh passkey assertion, bound to a member, their session and one action (adding a
passkey), answered once and redeemed once within two minutes.

Revision ID: 20261202_0012
Revises: 20261201_0011
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261202_0012"
down_revision: str | None = "20261201_0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "step_ups",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("member_id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=20), nullable=False),
        sa.Column("nonce", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("passkey_id", sa.String(length=40), nullable=True),
        sa.Column("redeemed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["member_id"], ["members.id"], name=op.f("fk_step_ups_member_id_members")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_step_ups_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_step_ups")),
    )
    with op.batch_alter_table("step_ups", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_step_ups_expires_at"), ["expires_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_step_ups_member_id"), ["member_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("step_ups", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_step_ups_member_id"))
        batch_op.drop_index(batch_op.f("ix_step_ups_expires_at"))
    op.drop_table("step_ups")
