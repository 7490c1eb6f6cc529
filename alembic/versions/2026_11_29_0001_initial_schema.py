"""Initial schema: organisations, agents, policy versions, wallets, tokens, payment intents, audit,
background job leases.

Revision ID: 20261129_0001
Revises:
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "organizations",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("approval_ttl_seconds", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("name", name=op.f("uq_organizations_name")),
    )
    op.create_table(
        "agents",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("name", sa.String(120), nullable=False),
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("disabled_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_agents_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_agents")),
        sa.UniqueConstraint("org_id", "name", name=op.f("uq_agents_org_id_name")),
    )
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_agents_org_id"), ["org_id"], unique=False)

    op.create_table(
        "audit_events",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("actor", sa.String(160), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=True),
        sa.Column("subject_id", sa.String(40), nullable=True),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_audit_events_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
        sa.UniqueConstraint("org_id", "seq", name=op.f("uq_audit_events_org_id_seq")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_events_agent_id"), ["agent_id"], unique=False)

    op.create_table(
        "access_tokens",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=True),
        sa.Column("client_id", sa.String(120), nullable=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("scopes", sa.String(400), nullable=False),
        sa.Column("audience", sa.String(400), nullable=False),
        sa.Column("label", sa.String(120), nullable=True),
        sa.Column("created_by", sa.String(120), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_access_tokens_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_access_tokens_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_access_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_access_tokens_token_hash")),
    )
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_access_tokens_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_access_tokens_org_id"), ["org_id"], unique=False)

    op.create_table(
        "payment_intents",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("idempotency_key", sa.String(128), nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("origin", sa.String(10), nullable=True),
        sa.Column("method", sa.String(10), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("resource", sa.String(2048), nullable=False),
        sa.Column("x402_version", sa.Integer(), nullable=False),
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("pay_to", sa.String(42), nullable=False),
        sa.Column("amount_atomic", sa.BigInteger(), nullable=False),
        sa.Column("payer", sa.String(42), nullable=False),
        sa.Column("nonce", sa.String(66), nullable=False),
        sa.Column("valid_after", sa.BigInteger(), nullable=False),
        sa.Column("valid_before", sa.BigInteger(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("decision", sa.JSON(), nullable=False),
        sa.Column("wallet_mode", sa.String(20), nullable=False),
        sa.Column("seller_status", sa.Integer(), nullable=True),
        sa.Column("tx_hash", sa.String(66), nullable=True),
        sa.Column("failure_code", sa.String(60), nullable=True),
        sa.Column("seller_reason", sa.String(500), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("authorized_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_payment_intents_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_payment_intents_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_payment_intents")),
        sa.UniqueConstraint(
            "agent_id", "idempotency_key", name=op.f("uq_payment_intents_agent_id_idempotency_key")
        ),
        sa.UniqueConstraint("payer", "nonce", name=op.f("uq_payment_intents_payer_nonce")),
    )
    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.create_index("ix_payment_intents_agent_created", ["agent_id", "created_at"], unique=False)
        batch_op.create_index("ix_payment_intents_org_authorized", ["org_id", "authorized_at"], unique=False)
        batch_op.create_index(
            "ix_payment_intents_status_valid_before", ["status", "valid_before"], unique=False
        )

    op.create_table(
        "policy_versions",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("document", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(120), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_policy_versions_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_policy_versions_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_policy_versions")),
        sa.UniqueConstraint("agent_id", "version", name=op.f("uq_policy_versions_agent_id_version")),
    )
    with op.batch_alter_table("policy_versions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_policy_versions_org_id"), ["org_id"], unique=False)

    op.create_table(
        "wallets",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("mode", sa.String(20), nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("sealed_secret", sa.LargeBinary(), nullable=True),
        sa.Column("account_name", sa.String(120), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_wallets_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_wallets_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wallets")),
    )
    with op.batch_alter_table("wallets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_wallets_agent_id"), ["agent_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_wallets_org_id"), ["org_id"], unique=False)

    op.create_table(
        "job_leases",
        sa.Column("name", sa.String(60), nullable=False),
        sa.Column("holder", sa.String(120), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_job_leases")),
    )


def downgrade() -> None:
    op.drop_table("job_leases")
    with op.batch_alter_table("wallets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_wallets_org_id"))
        batch_op.drop_index(batch_op.f("ix_wallets_agent_id"))

    op.drop_table("wallets")
    with op.batch_alter_table("policy_versions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_policy_versions_org_id"))

    op.drop_table("policy_versions")
    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.drop_index("ix_payment_intents_status_valid_before")
        batch_op.drop_index("ix_payment_intents_org_authorized")
        batch_op.drop_index("ix_payment_intents_agent_created")

    op.drop_table("payment_intents")
    with op.batch_alter_table("access_tokens", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_access_tokens_org_id"))
        batch_op.drop_index(batch_op.f("ix_access_tokens_agent_id"))

    op.drop_table("access_tokens")
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_events_agent_id"))

    op.drop_table("audit_events")
    with op.batch_alter_table("agents", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_agents_org_id"))

    op.drop_table("agents")
    op.drop_table("organizations")
