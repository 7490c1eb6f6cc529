"""Which master key each sealed value is sealed with (its key id), and the database's own sealed
secrets (the audit chain's key once the master key was rotated).

The key id is the first 16 hex digits of the key's check value, so the values sealed so far are
given the id of the key the database recorded; a database older than the check value (no row yet)
leaves them unnamed, and the first rotation names them.

Revision ID: 20261204_0016
Revises: 20261204_0015
Create Date: 2026-12-04
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261204_0016"
down_revision: str | None = "20261204_0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, sealed column, key id column)
_SEALED = (
    ("wallets", "sealed_secret", "sealed_key_id"),
    ("organizations", "slack_webhook_sealed", "slack_webhook_key_id"),
    ("pending_changes", "result_sealed", "result_key_id"),
)


def upgrade() -> None:
    # Plain ADD COLUMN on both databases: no table is rebuilt.
    for table, sealed, key_id in _SEALED:
        op.add_column(table, sa.Column(key_id, sa.String(length=16), nullable=True))
        op.execute(
            f"UPDATE {table} SET {key_id} = "  # noqa: S608 - fixed names, no input
            "(SELECT substr(check_value, 1, 16) FROM master_key_checks WHERE id = 1) "
            f"WHERE {sealed} IS NOT NULL"
        )
    op.create_table(
        "sealed_secrets",
        sa.Column("name", sa.String(length=60), nullable=False),
        sa.Column("sealed", sa.LargeBinary(), nullable=False),
        sa.Column("key_id", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("sealed_secrets")
    # Dropped in place (SQLite 3.35 and later do): a batch rebuild of `organizations` fails once
    # other tables' rows refer to it, and these columns carry no index or constraint.
    for table, _sealed, key_id in reversed(_SEALED):
        op.drop_column(table, key_id)
