"""The approval page and its notifications: a WebAuthn challenge may be bound to one approval and a
single-use nonce (a decision with a passkey), and pending approvals are announced through an outbox.

Revision ID: 20261201_0011
Revises: 20261201_0010
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261201_0011"
down_revision: str | None = "20261201_0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("webauthn_challenges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("approval_id", sa.String(length=40), nullable=True))
        batch_op.add_column(sa.Column("nonce", sa.LargeBinary(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_webauthn_challenges_approval_id_approvals"), "approvals", ["approval_id"], ["id"]
        )
    op.create_table(
        "approval_notifications",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("approval_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_by", sa.String(length=120), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("announced", sa.Integer(), nullable=False),
        sa.Column("error", sa.String(length=40), nullable=True),
        sa.ForeignKeyConstraint(
            ["approval_id"], ["approvals.id"], name=op.f("fk_approval_notifications_approval_id_approvals")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_approval_notifications_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval_notifications")),
        sa.UniqueConstraint("approval_id", name=op.f("uq_approval_notifications_approval_id")),
    )
    with op.batch_alter_table("approval_notifications", schema=None) as batch_op:
        batch_op.create_index("ix_approval_notifications_org_status", ["org_id", "status"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_approval_notifications_finished_at"), ["finished_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("approval_notifications", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_notifications_finished_at"))
        batch_op.drop_index("ix_approval_notifications_org_status")
    op.drop_table("approval_notifications")
    with op.batch_alter_table("webauthn_challenges", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_webauthn_challenges_approval_id_approvals"), type_="foreignkey"
        )
        batch_op.drop_column("nonce")
        batch_op.drop_column("approval_id")
