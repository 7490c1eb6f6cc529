"""Policy change requests: more room an agent asks for (request_policy_change), waiting for an
owner or admin to approve or reject it with a passkey whose challenge names the request.

Revision ID: 20261204_0019
Revises: 20261204_0018
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0019"
down_revision: str | None = "20261204_0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "policy_change_requests",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("asked_by", sa.String(length=80), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("change_json", sa.Text(), nullable=False),
        sa.Column("change_hash", sa.String(length=64), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(length=40), nullable=True),
        sa.Column("applied_version", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_policy_change_requests_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["decided_by"], ["members.id"], name=op.f("fk_policy_change_requests_decided_by_members")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_policy_change_requests_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_policy_change_requests")),
    )
    op.create_index(
        "ix_policy_change_requests_agent_status", "policy_change_requests", ["agent_id", "status"]
    )
    op.create_index("ix_policy_change_requests_org_status", "policy_change_requests", ["org_id", "status"])
    op.create_index(op.f("ix_policy_change_requests_expires_at"), "policy_change_requests", ["expires_at"])
    with op.batch_alter_table("webauthn_challenges", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy_change_id", sa.String(length=40), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_webauthn_challenges_policy_change_id_policy_change_requests"),
            "policy_change_requests",
            ["policy_change_id"],
            ["id"],
        )


def downgrade() -> None:
    with op.batch_alter_table("webauthn_challenges", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_webauthn_challenges_policy_change_id_policy_change_requests"), type_="foreignkey"
        )
        batch_op.drop_column("policy_change_id")
    op.execute("DELETE FROM webauthn_challenges WHERE purpose IN ('approve_policy', 'reject_policy')")
    op.drop_index(op.f("ix_policy_change_requests_expires_at"), table_name="policy_change_requests")
    op.drop_index("ix_policy_change_requests_org_status", table_name="policy_change_requests")
    op.drop_index("ix_policy_change_requests_agent_status", table_name="policy_change_requests")
    op.drop_table("policy_change_requests")
