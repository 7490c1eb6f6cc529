"""Wallet sweeps: a retired wallet's USDC moved to its agent's current wallet, one open per network.

Revision ID: 20261206_0022
Revises: 20261206_0021
Create Date: 2026-12-06
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261206_0022"
down_revision: str | None = "20261206_0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "wallet_sweeps",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("org_id", sa.String(length=40), nullable=False),
        sa.Column("agent_id", sa.String(length=40), nullable=False),
        sa.Column("wallet_id", sa.String(length=40), nullable=False),
        sa.Column("to_wallet_id", sa.String(length=40), nullable=False),
        sa.Column("network", sa.String(length=40), nullable=False),
        sa.Column("asset", sa.String(length=42), nullable=False),
        sa.Column("payer", sa.String(length=42), nullable=False),
        sa.Column("pay_to", sa.String(length=42), nullable=False),
        sa.Column("amount_atomic", sa.BigInteger(), nullable=False),
        sa.Column("nonce", sa.String(length=66), nullable=False),
        sa.Column("valid_after", sa.BigInteger(), nullable=False),
        sa.Column("valid_before", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("open_slot", sa.String(length=90), nullable=True),
        sa.Column("signature", sa.String(length=132), nullable=True),
        sa.Column("raw_transaction", sa.Text(), nullable=True),
        sa.Column("tx_hash", sa.String(length=66), nullable=True),
        sa.Column("submitted_by", sa.String(length=42), nullable=True),
        sa.Column("failure_code", sa.String(length=60), nullable=True),
        sa.Column("lapse_block", sa.BigInteger(), nullable=True),
        sa.Column("created_by", sa.String(length=120), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("signed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["agent_id"], ["agents.id"], name=op.f("fk_wallet_sweeps_agent_id_agents")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name=op.f("fk_wallet_sweeps_org_id_organizations")
        ),
        sa.ForeignKeyConstraint(
            ["to_wallet_id"], ["wallets.id"], name=op.f("fk_wallet_sweeps_to_wallet_id_wallets")
        ),
        sa.ForeignKeyConstraint(
            ["wallet_id"], ["wallets.id"], name=op.f("fk_wallet_sweeps_wallet_id_wallets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wallet_sweeps")),
        sa.UniqueConstraint("open_slot", name=op.f("uq_wallet_sweeps_open_slot")),
    )
    op.create_index("ix_wallet_sweeps_agent_created", "wallet_sweeps", ["agent_id", "created_at"])
    op.create_index(op.f("ix_wallet_sweeps_org_id"), "wallet_sweeps", ["org_id"])
    op.create_index(op.f("ix_wallet_sweeps_wallet_id"), "wallet_sweeps", ["wallet_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_wallet_sweeps_wallet_id"), table_name="wallet_sweeps")
    op.drop_index(op.f("ix_wallet_sweeps_org_id"), table_name="wallet_sweeps")
    op.drop_index("ix_wallet_sweeps_agent_created", table_name="wallet_sweeps")
    op.drop_table("wallet_sweeps")
