"""The catalog's full-text index: database objects that only the migrations describe.

Each database indexes `catalog_entries.search_title` and `search_body` its own way, with the same
tokens and the same matches (both columns hold plain lower-case words, see
server/catalog/text.py):

- SQLite: an FTS5 table `catalog_search` (`entry_id` unindexed, then the two columns, tokenizer
  `unicode61`), kept in step with `catalog_entries` by three triggers. SQLite drops a table's
  triggers with the table, so a migration that rebuilds `catalog_entries` (a batch alter) must
  create them again: tests/catalog/test_full_text.py checks they are there and work.
- PostgreSQL: a stored generated `tsvector` column `catalog_entries.search_vector` (the title
  with weight A, the body with weight B, configuration `simple`) and its GIN index.

The models do not declare them (neither has a portable SQLAlchemy type), so the comparison of the
migrated schema with the models, and Alembic's autogenerate, skip them by name.
"""

from __future__ import annotations

from typing import Any

SQLITE_TABLE = "catalog_search"
SQLITE_SHADOW_TABLES = frozenset(
    f"{SQLITE_TABLE}_{suffix}" for suffix in ("data", "idx", "content", "docsize", "config")
)
SQLITE_TRIGGERS = (
    "catalog_entries_search_insert",
    "catalog_entries_search_update",
    "catalog_entries_search_delete",
)
POSTGRES_COLUMN = "search_vector"
POSTGRES_INDEX = "ix_catalog_entries_search_vector"

_TABLES = frozenset({SQLITE_TABLE}) | SQLITE_SHADOW_TABLES


def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic's `include_name` hook: leave the full-text objects out of schema comparisons."""
    if type_ == "table":
        return name not in _TABLES
    if type_ == "column":
        return not (parent_names.get("table_name") == "catalog_entries" and name == POSTGRES_COLUMN)
    if type_ == "index":
        return name != POSTGRES_INDEX
    return True
