"""Client ID metadata documents that failed are remembered for a while, so the authorization
endpoint cannot be used to make Paywarden fetch a failing URL at any rate.

Revision ID: 20261202_0013
Revises: 20261202_0012
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261202_0013"
down_revision: str | None = "20261202_0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oauth_document_failures",
        sa.Column("url_hash", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=False),
        sa.Column("reason", sa.String(length=40), nullable=False),
        sa.Column("failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retry_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("url_hash", name=op.f("pk_oauth_document_failures")),
    )
    with op.batch_alter_table("oauth_document_failures", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_oauth_document_failures_retry_at"), ["retry_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("oauth_document_failures", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_oauth_document_failures_retry_at"))
    op.drop_table("oauth_document_failures")
