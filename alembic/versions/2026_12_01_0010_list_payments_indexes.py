"""list_payments reads an agent's newest intents, optionally of one status, ordered by (created_at,
id): two indexes that hold exactly that order, so the page is read from the index with no sort and
no walk over rows of other statuses. The old (agent_id, created_at) index is a prefix of the first.

Revision ID: 20261201_0010
Revises: 20261130_0009
Create Date: 2026-12-01
"""

from collections.abc import Sequence

from alembic import op

revision: str = "20261201_0010"
down_revision: str | None = "20261130_0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_payment_intents_agent_created_id",
        "payment_intents",
        ["agent_id", "created_at", "id"],
        unique=False,
    )
    op.create_index(
        "ix_payment_intents_agent_status_created",
        "payment_intents",
        ["agent_id", "status", "created_at", "id"],
        unique=False,
    )
    op.drop_index("ix_payment_intents_agent_created", table_name="payment_intents")


def downgrade() -> None:
    op.create_index(
        "ix_payment_intents_agent_created", "payment_intents", ["agent_id", "created_at"], unique=False
    )
    op.drop_index("ix_payment_intents_agent_status_created", table_name="payment_intents")
    op.drop_index("ix_payment_intents_agent_created_id", table_name="payment_intents")
