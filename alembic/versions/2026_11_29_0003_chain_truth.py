"""Chain truth: the seller's claimed transaction kept apart from the one found on-chain, per-wallet
scan cursors, and findings of money that left a wallet outside any payment Paywarden allowed.

Revision ID: 20261129_0003
Revises: 20261129_0002
Create Date: 2026-11-29
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261129_0003"
down_revision: str | None = "20261129_0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.add_column(sa.Column("seller_tx_hash", sa.String(66), nullable=True))

    op.create_table(
        "chain_scan_cursors",
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("address", sa.String(42), nullable=False),
        sa.Column("next_block", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("network", "asset", "address", name=op.f("pk_chain_scan_cursors")),
    )

    op.create_table(
        "out_of_policy_findings",
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("org_id", sa.String(40), nullable=False),
        sa.Column("agent_id", sa.String(40), nullable=False),
        sa.Column("wallet_address", sa.String(42), nullable=False),
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("asset", sa.String(42), nullable=False),
        sa.Column("tx_hash", sa.String(66), nullable=False),
        sa.Column("log_index", sa.Integer(), nullable=False),
        sa.Column("block_number", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("counterparty", sa.String(42), nullable=True),
        sa.Column("amount_atomic", sa.BigInteger(), nullable=True),
        sa.Column("nonce", sa.String(66), nullable=True),
        sa.Column("intent_id", sa.String(40), nullable=True),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent_id"], ["agents.id"], name=op.f("fk_out_of_policy_findings_agent_id_agents")
        ),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_out_of_policy_findings_org_id_organizations")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_out_of_policy_findings")),
        sa.UniqueConstraint(
            "agent_id",
            "network",
            "tx_hash",
            "log_index",
            name=op.f("uq_out_of_policy_findings_agent_id_network_tx_hash_log_index"),
        ),
    )
    with op.batch_alter_table("out_of_policy_findings", schema=None) as batch_op:
        batch_op.create_index(
            "ix_out_of_policy_findings_agent_detected", ["agent_id", "detected_at"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_out_of_policy_findings_org_id"), ["org_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("out_of_policy_findings", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_out_of_policy_findings_org_id"))
        batch_op.drop_index("ix_out_of_policy_findings_agent_detected")
    op.drop_table("out_of_policy_findings")
    op.drop_table("chain_scan_cursors")
    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.drop_column("seller_tx_hash")
