"""Step-ups: a fresh passkey assertion, bound to a member, their session and one action (adding a
passkey), answered once and redeemed once within two minutes. And the Slack outbox announces a
passkey added or removed (an audit event) as well as a pending approval.

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
    with op.batch_alter_table("approval_notifications", schema=None) as batch_op:
        batch_op.alter_column("approval_id", existing_type=sa.String(length=40), nullable=True)
        batch_op.add_column(sa.Column("audit_event_id", sa.String(length=40), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_approval_notifications_audit_event_id_audit_events"),
            "audit_events",
            ["audit_event_id"],
            ["id"],
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_approval_notifications_audit_event_id"), ["audit_event_id"]
        )


def downgrade() -> None:
    op.execute("DELETE FROM approval_notifications WHERE approval_id IS NULL")
    with op.batch_alter_table("approval_notifications", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("uq_approval_notifications_audit_event_id"), type_="unique")
        batch_op.drop_constraint(
            batch_op.f("fk_approval_notifications_audit_event_id_audit_events"), type_="foreignkey"
        )
        batch_op.drop_column("audit_event_id")
        batch_op.alter_column("approval_id", existing_type=sa.String(length=40), nullable=False)
    with op.batch_alter_table("step_ups", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_step_ups_member_id"))
        batch_op.drop_index(batch_op.f("ix_step_ups_expires_at"))
    op.drop_table("step_ups")
