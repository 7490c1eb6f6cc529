"""The catalog grows up: our own summary and example request, untrusted seller text, candidates
waiting for an operator, verification results, suspension, prices per network, and full-text
search (SQLite FTS5, PostgreSQL tsvector with a GIN index). Payment intents are indexed by host
and time sent, for sellers' measured reliability.

Existing entries become accepted operator entries with one offer: their network and price.

Revision ID: 20261130_0006
Revises: 20261130_0005
Create Date: 2026-11-30
"""

import re
import unicodedata
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "20261130_0006"
down_revision: str | None = "20261130_0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The words the catalog's search columns hold, as server/catalog/text.py writes them (copied: a
# migration must not change when the application's code does).
_WORD = re.compile(r"[a-z0-9]+")


def _words(text: str) -> list[str]:
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return _WORD.findall(folded)


def _searchable(*texts: str) -> str:
    seen: dict[str, None] = {}
    for text in texts:
        for word in _words(text):
            seen.setdefault(word)
    return " ".join(seen)


SQLITE_FTS = (
    "CREATE VIRTUAL TABLE catalog_search USING fts5("
    "entry_id UNINDEXED, search_title, search_body, "
    "tokenize = 'unicode61 remove_diacritics 0', prefix = '2 3')"
)
SQLITE_TRIGGERS = (
    """
    CREATE TRIGGER catalog_entries_search_insert AFTER INSERT ON catalog_entries BEGIN
        INSERT INTO catalog_search (entry_id, search_title, search_body)
        VALUES (new.id, new.search_title, new.search_body);
    END
    """,
    """
    CREATE TRIGGER catalog_entries_search_update
    AFTER UPDATE OF id, search_title, search_body ON catalog_entries BEGIN
        DELETE FROM catalog_search WHERE entry_id = old.id;
        INSERT INTO catalog_search (entry_id, search_title, search_body)
        VALUES (new.id, new.search_title, new.search_body);
    END
    """,
    """
    CREATE TRIGGER catalog_entries_search_delete AFTER DELETE ON catalog_entries BEGIN
        DELETE FROM catalog_search WHERE entry_id = old.id;
    END
    """,
)
POSTGRES_VECTOR = (
    "ALTER TABLE catalog_entries ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ("
    "setweight(to_tsvector('simple', search_title), 'A') || "
    "setweight(to_tsvector('simple', search_body), 'B')) STORED"
)
POSTGRES_INDEX = "CREATE INDEX ix_catalog_entries_search_vector ON catalog_entries USING gin (search_vector)"


def upgrade() -> None:
    bind = op.get_bind()
    entries = sa.table(
        "catalog_entries",
        sa.column("id", sa.String),
        sa.column("host", sa.String),
        sa.column("name", sa.String),
        sa.column("category", sa.String),
        sa.column("network", sa.String),
        sa.column("price_atomic", sa.BigInteger),
        sa.column("created_at", sa.DateTime(timezone=True)),
    )
    existing = list(bind.execute(sa.select(entries)).mappings())

    with op.batch_alter_table("catalog_entries", schema=None) as batch_op:
        batch_op.add_column(sa.Column("method", sa.String(10), nullable=False, server_default="GET"))
        batch_op.add_column(sa.Column("example_body", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("summary", sa.String(500), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("seller_description", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("source", sa.String(10), nullable=False, server_default="admin"))
        batch_op.add_column(sa.Column("observed_pay_to", sa.JSON(), nullable=False, server_default="[]"))
        batch_op.add_column(
            sa.Column("instruction_like", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch_op.add_column(sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("check_error", sa.String(60), nullable=True))
        batch_op.add_column(sa.Column("suspension_reason", sa.String(20), nullable=True))
        batch_op.add_column(sa.Column("search_title", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("search_body", sa.Text(), nullable=False, server_default=""))
        batch_op.drop_column("price_atomic")
        batch_op.drop_column("network")

    # The defaults only filled the rows that were there; the application always writes these.
    with op.batch_alter_table("catalog_entries", schema=None) as batch_op:
        for name in ("method", "summary", "source", "observed_pay_to", "instruction_like"):
            batch_op.alter_column(name, server_default=None)
        batch_op.alter_column("search_title", server_default=None)
        batch_op.alter_column("search_body", server_default=None)

    # After the rebuild of catalog_entries: SQLite's batch mode drops and renames the table, which
    # rows of a table referring to it would forbid.
    op.create_table(
        "catalog_offers",
        sa.Column("entry_id", sa.String(40), nullable=False),
        sa.Column("network", sa.String(40), nullable=False),
        sa.Column("amount_atomic", sa.BigInteger(), nullable=False),
        sa.Column("pay_to", sa.String(42), nullable=True),
        sa.ForeignKeyConstraint(
            ["entry_id"], ["catalog_entries.id"], name=op.f("fk_catalog_offers_entry_id_catalog_entries")
        ),
        sa.PrimaryKeyConstraint("entry_id", "network", name=op.f("pk_catalog_offers")),
    )
    offers = sa.table(
        "catalog_offers",
        sa.column("entry_id", sa.String),
        sa.column("network", sa.String),
        sa.column("amount_atomic", sa.BigInteger),
        sa.column("pay_to", sa.String),
    )
    if existing:
        op.bulk_insert(
            offers,
            [
                {"entry_id": row["id"], "network": row["network"], "amount_atomic": row["price_atomic"]}
                for row in existing
            ],
        )

    written = sa.table(
        "catalog_entries",
        sa.column("id", sa.String),
        sa.column("accepted_at", sa.DateTime(timezone=True)),
        sa.column("search_title", sa.Text),
        sa.column("search_body", sa.Text),
    )
    for row in existing:
        bind.execute(
            sa.update(written)
            .where(written.c.id == row["id"])
            .values(
                accepted_at=row["created_at"],
                search_title=_searchable(row["name"]),
                search_body=_searchable(row["category"], row["host"].replace(".", " ")),
            )
        )

    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.create_index("ix_payment_intents_host_submitted", ["host", "submitted_at"], unique=False)

    if bind.dialect.name == "sqlite":
        op.execute(SQLITE_FTS)
        for trigger in SQLITE_TRIGGERS:
            op.execute(trigger)
        op.execute(
            "INSERT INTO catalog_search (entry_id, search_title, search_body) "
            "SELECT id, search_title, search_body FROM catalog_entries"
        )
    else:
        op.execute(POSTGRES_VECTOR)
        op.execute(POSTGRES_INDEX)


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        for name in (
            "catalog_entries_search_insert",
            "catalog_entries_search_update",
            "catalog_entries_search_delete",
        ):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS catalog_search")
    else:
        op.execute("DROP INDEX IF EXISTS ix_catalog_entries_search_vector")
        op.execute("ALTER TABLE catalog_entries DROP COLUMN IF EXISTS search_vector")

    with op.batch_alter_table("payment_intents", schema=None) as batch_op:
        batch_op.drop_index("ix_payment_intents_host_submitted")

    # Each entry keeps its cheapest offer as its one network and price.
    offers = sa.table(
        "catalog_offers",
        sa.column("entry_id", sa.String),
        sa.column("network", sa.String),
        sa.column("amount_atomic", sa.BigInteger),
    )
    cheapest: dict[str, tuple[int, str]] = {}
    for row in bind.execute(sa.select(offers)).mappings():
        current = cheapest.get(row["entry_id"])
        if current is None or row["amount_atomic"] < current[0]:
            cheapest[row["entry_id"]] = (row["amount_atomic"], row["network"])
    op.drop_table("catalog_offers")

    with op.batch_alter_table("catalog_entries", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("network", sa.String(40), nullable=False, server_default="eip155:84532")
        )
        batch_op.add_column(sa.Column("price_atomic", sa.BigInteger(), nullable=False, server_default="0"))
    entries = sa.table(
        "catalog_entries",
        sa.column("id", sa.String),
        sa.column("network", sa.String),
        sa.column("price_atomic", sa.BigInteger),
    )
    for entry_id, (amount, network) in cheapest.items():
        bind.execute(
            sa.update(entries).where(entries.c.id == entry_id).values(network=network, price_atomic=amount)
        )

    with op.batch_alter_table("catalog_entries", schema=None) as batch_op:
        batch_op.alter_column("network", server_default=None)
        batch_op.alter_column("price_atomic", server_default=None)
        for name in (
            "search_body",
            "search_title",
            "suspension_reason",
            "check_error",
            "checked_at",
            "accepted_at",
            "instruction_like",
            "observed_pay_to",
            "source",
            "seller_description",
            "summary",
            "example_body",
            "method",
        ):
            batch_op.drop_column(name)
