"""Teams and members, versioned spending rules, approvals, the catalog; intents gain the requested
path, may wait unauthorised for a human, and are indexed by payee.

Revision ID: 20261129_0002
Revises: 20261129_0001
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0002"
down_revision: str | None = "20261129_0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["org_id"], ["organizations.id"], name=op.f("fk_teams_org_id_organizations")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_teams")),
        sa.UniqueConstraint("org_id", "name", name=op.f("uq_teams_org_id_name")),
    )
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_teams_org_id"), ["org_id"], unique=False)

    op.create_table(
        "members",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("email", sa.String(254), nullable=False),
        sa.Column("role", sa.String(20), nullable=False),
        sa.Column("enroll_token_hash", sa.String(64), nullable=True),
        sa.Column("enroll_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_members_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_members")),
        sa.UniqueConstraint("enroll_token_hash", name=op.f("uq_members_enroll_token_hash")),
        sa.UniqueConstraint("org_id", "email", name=op.f("uq_members_org_id_email")),
    )
    with op.batch_alter_table("members", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_members_org_id"), ["org_id"], unique=False)

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("team_id", sa.String(40), nullable=True))
        batch_op.add_column(sa.Column("member_id", sa.String(40), nullable=True))
        batch_op.create_foreign_key(batch_op.f("fk_agents_team_id_teams"), "teams", ["team_id"], ["id"])
        batch_op.create_foreign_key(
            batch_op.f("fk_agents_member_id_members"), "members", ["member_id"], ["id"]
        )
        batch_op.create_index(batch_op.f("ix_agents_team_id"), ["team_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_agents_member_id"), ["member_id"], unique=False)

    op.create_table(
        "rule_versions",
        sa.Column("rule_id", sa.String(40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("scope", sa.String(10), nullable=False),
        sa.Column("scope_id", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("host", sa.String(255), nullable=True),
        sa.Column("path_prefix", sa.String(512), nullable=True),
        sa.Column("limit_atomic", sa.BigInteger(), nullable=True),
        sa.Column("window", sa.String(10), nullable=True),
        sa.Column("source", sa.String(10), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_by", sa.String(160), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_rule_versions_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("rule_id", "version", name=op.f("pk_rule_versions")),
    )
    with op.batch_alter_table("rule_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rule_versions_org_id"), ["org_id"], unique=False)
        batch_op.create_index("ix_rule_versions_scope", ["scope", "scope_id"], unique=False)

    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("path", sa.String(2048), nullable=True))
        batch_op.alter_column("authorized_at", existing_type=sa.DateTime(timezone=True), nullable=True)
        batch_op.create_index("ix_payment_intents_org_pay_to", ["org_id", "pay_to"], unique=False)

    op.create_table(
        "approvals",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("intent_id", sa.String(40), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("reason", sa.String(40), nullable=False),
        sa.Column("threshold_atomic", sa.BigInteger(), nullable=True),
        sa.Column("amount_atomic", sa.BigInteger(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("resource", sa.String(2048), nullable=False),
        sa.Column("pay_to", sa.String(42), nullable=False),
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("decision", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_by", sa.String(40), nullable=True),
        sa.Column("consumed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_approvals_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["intent_id"], ["payment_intents.id"], name=op.f("fk_approvals_intent_id_payment_intents")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_approvals_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
        sa.UniqueConstraint("intent_id", name=op.f("uq_approvals_intent_id")),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index("ix_approvals_org_status", ["org_id", "status"], unique=False)
        batch_op.create_index("ix_approvals_agent_status", ["agent_id", "status"], unique=False)

    op.create_table(
        "catalog_entries",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("price_atomic", sa.BigInteger(), nullable=False),
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("category", sa.String(40), nullable=False),
        sa.Column("pay_to_mode", sa.String(10), nullable=False),
        sa.Column("pinned_pay_to", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(160), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("suspended_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_catalog_entries")),
        sa.UniqueConstraint("host", name=op.f("uq_catalog_entries_host")),
    )


def downgrade() -> None:
    op.drop_table("catalog_entries")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index("ix_approvals_agent_status")
        batch_op.drop_index("ix_approvals_org_status")
    op.drop_table("approvals")

    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.drop_index("ix_payment_intents_org_pay_to")
        batch_op.alter_column("authorized_at", existing_type=sa.DateTime(timezone=True), nullable=False)
        batch_op.drop_column("path")

    with op.batch_alter_table("rule_versions", schema=None) as batch_op:
        batch_op.drop_index("ix_rule_versions_scope")
        batch_op.drop_index(batch_op.f("ix_rule_versions_org_id"))
    op.drop_table("rule_versions")

    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agents_member_id"))
        batch_op.drop_index(batch_op.f("ix_agents_team_id"))
        batch_op.drop_constraint(batch_op.f("fk_agents_member_id_members"), type_="foreignkey")
        batch_op.drop_constraint(batch_op.f("fk_agents_team_id_teams"), type_="foreignkey")
        batch_op.drop_column("member_id")
        batch_op.drop_column("team_id")

    with op.batch_alter_table("members", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_members_org_id"))
    op.drop_table("members")
    with op.batch_alter_table("teams", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_teams_org_id"))
    op.drop_table("teams")
