"""The catalog's full-text index, which only the migrations describe (server/models/search.py):
it exists on both databases, follows every change to an entry, and matches the same entries with
the same relevance on SQLite and PostgreSQL. The migration that adds it keeps existing entries."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from sqlmodel import col, delete, select

from server.catalog.repository import CatalogRepository
from server.catalog.service import EntryChanges, add_entry, edit_entry
from server.catalog.text import query_terms
from server.kit.db import Database
from server.kit.migrations import alembic_config
from server.models import CatalogEntry, CatalogOffer
from server.models.search import POSTGRES_COLUMN, POSTGRES_INDEX, SQLITE_TABLE, SQLITE_TRIGGERS
from tests.support.clocks import written
from tests.support.databases import database_url, migrated_database

NOW = written(2026, 11, 30, 12, 0)
CORPUS = [
    ("Web Search", "search", "Ranked web results for any query.", "search.example"),
    ("Forecast Hub", "weather", "Hourly weather forecasts for a city.", "forecast.example"),
    ("Crypto Prices", "market-data", "Spot prices of coins, in USD.", "prices.example"),
    ("Page Scraper", "scraping", "Fetches a web page and returns it as Markdown.", "scrape.example"),
    ("Café Münster", "food", "Menus of cafés; prices included.", "cafe.example"),
    ("Searchlight", "news", "Searches news articles by keyword.", "light.example"),
]
QUERIES = ["web search", "crypto prices", "prices", "cafe", "café", "search", "forecast weather", "nothing"]


def _fill(db: Database) -> None:
    with db.write() as session:
        for name, category, summary, host in CORPUS:
            entry = add_entry(
                session,
                name=name,
                host=host,
                url=f"https://{host}/v1",
                price_usd=Decimal("0.01"),
                network="eip155:8453",
                category=category,
                pay_to=[],
                actor="test",
                now=NOW,
                summary=summary,
            )
            entry.verified_at = NOW


def _search(db: Database, query: str) -> tuple[int, list[tuple[str, int]]]:
    with db.read() as session:
        total, rows = CatalogRepository(session).search(
            query_terms(query), fresh_since=NOW - timedelta(hours=24), category=None, network=None, limit=50
        )
    return total, [(entry.host, relevance) for entry, relevance in rows]


def _index_rows(db: Database, entry_id: str) -> int:
    with db.engine.connect() as conn:
        if db.is_sqlite:
            query = sa.text(f"SELECT count(*) FROM {SQLITE_TABLE} WHERE entry_id = :id")
        else:
            query = sa.text(
                f"SELECT count(*) FROM catalog_entries WHERE id = :id AND {POSTGRES_COLUMN} IS NOT NULL"
            )
        return int(conn.execute(query, {"id": entry_id}).scalar_one())


def test_the_index_exists_where_the_migrations_put_it(db: Database) -> None:
    with db.engine.connect() as conn:
        if db.is_sqlite:
            tables = set(
                conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'table'")).scalars()
            )
            triggers = set(
                conn.execute(sa.text("SELECT name FROM sqlite_master WHERE type = 'trigger'")).scalars()
            )
            assert SQLITE_TABLE in tables
            assert set(SQLITE_TRIGGERS) <= triggers
        else:
            kind = conn.execute(
                sa.text(
                    "SELECT data_type FROM information_schema.columns "
                    "WHERE table_name = 'catalog_entries' AND column_name = :name"
                ),
                {"name": POSTGRES_COLUMN},
            ).scalar_one()
            assert kind == "tsvector"
            method = conn.execute(
                sa.text(
                    "SELECT am.amname FROM pg_class c JOIN pg_am am ON am.oid = c.relam "
                    "WHERE c.relname = :name"
                ),
                {"name": POSTGRES_INDEX},
            ).scalar_one()
            assert method == "gin"


def test_the_index_follows_every_change_to_an_entry(db: Database) -> None:
    _fill(db)
    assert [host for host, _ in _search(db, "forecast")[1]] == ["forecast.example"]
    with db.write() as session:
        edited = edit_entry(
            session, "forecast.example", changes=EntryChanges(summary="Tide tables for ports.")
        )
        entry_id = edited.id
    assert _search(db, "forecast")[1] == [("forecast.example", 5)]  # still in its name
    assert _search(db, "weather")[1] == [("forecast.example", 4)]  # its category
    assert _search(db, "tide")[1] == [("forecast.example", 4)]
    assert _search(db, "hourly") == (0, [])
    with db.write() as session:
        edit_entry(session, entry_id, changes=EntryChanges(name="Harbour Tides"))
    assert _search(db, "forecast") == (1, [("forecast.example", 4)])  # its host still says so
    assert _search(db, "harbour tide")[1] == [("forecast.example", 10)]
    assert _index_rows(db, entry_id) == 1
    with db.write() as session:
        session.execute(delete(CatalogOffer).where(col(CatalogOffer.entry_id) == entry_id))
        session.execute(delete(CatalogEntry).where(col(CatalogEntry.id) == entry_id))
    assert _search(db, "harbour") == (0, [])
    assert _index_rows(db, entry_id) == 0


def test_relevance_counts_terms_matched_then_terms_in_the_name(db: Database) -> None:
    _fill(db)
    # Both terms in the name (4+1 each); "search" as a prefix of a name word (4+1); "web" in a summary.
    total, rows = _search(db, "web search")
    assert rows == [("search.example", 10), ("light.example", 5), ("scrape.example", 4)]
    assert total == 3
    assert _search(db, "find me a web search API") == (total, rows)


def test_both_databases_match_the_same_entries_with_the_same_relevance(tmp_path: Path) -> None:
    seen: dict[str, list[tuple[int, list[tuple[str, int]]]]] = {}
    for kind in ("sqlite", "postgres"):
        (tmp_path / kind).mkdir()
        with migrated_database(kind, tmp_path / kind) as db:
            _fill(db)
            seen[kind] = [_search(db, query) for query in QUERIES]
    assert seen["sqlite"] == seen["postgres"]
    assert seen["sqlite"][QUERIES.index("cafe")] == seen["sqlite"][QUERIES.index("café")]
    assert seen["sqlite"][QUERIES.index("nothing")] == (0, [])


def _upgrade_to(db: Database, revision: str) -> None:
    config = alembic_config()
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def test_the_migration_keeps_existing_entries_listed_priced_and_searchable(tmp_path: Path) -> None:
    for kind in ("sqlite", "postgres"):
        (tmp_path / kind).mkdir()
        with database_url(kind, tmp_path / kind) as url:
            db = Database(url)
            try:
                _upgrade_to(db, "20261129_0003")
                with db.engine.begin() as conn:
                    conn.execute(
                        sa.text(
                            "INSERT INTO catalog_entries (id, host, name, url, price_atomic, network, "
                            "category, pay_to_mode, pinned_pay_to, created_by, created_at) VALUES "
                            "('cat_old', 'api.old.example', 'Old Search', 'https://api.old.example/q', 7000, "
                            "'eip155:8453', 'search', 'rotating', '[]', 'test', :now)"
                        ),
                        {"now": NOW if kind == "postgres" else NOW.replace(tzinfo=None)},
                    )
                _upgrade_to(db, "head")
                with db.read() as session:
                    entry = session.get(CatalogEntry, "cat_old")
                    assert entry is not None
                    assert entry.accepted_at == NOW
                    assert (entry.method, entry.summary, entry.source) == ("GET", "", "admin")
                    offers = session.exec(select(CatalogOffer)).all()
                    assert [(o.entry_id, o.network, o.amount_atomic) for o in offers] == [
                        ("cat_old", "eip155:8453", 7000)
                    ]
                    entry.verified_at = NOW
                with db.write() as session:
                    session.add(entry)
                assert _search(db, "old search") == (1, [("api.old.example", 10)])
            finally:
                db.dispose()
