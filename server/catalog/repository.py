"""Every query on the catalog. The catalog is shared by every organisation, so it is not scoped.

Full-text search runs in the database: SQLite's FTS5 table or PostgreSQL's tsvector column (see
server/models/search.py). Each query term is looked up twice, in any of the entry's words and in
its name alone, and an entry's relevance is the sum over terms of 4 for a match anywhere and 1 more
for a match in the name: an entry that matches more of the terms always comes first, and among
those, more of them in its name. Both databases answer the same matches, so the same scores.
One statement scores, counts and orders the matches; each term's branch applies the search's
filters itself, so the index drives every branch and nothing large is joined.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Column as SaColumn
from sqlalchemy import (
    ColumnElement,
    MetaData,
    Select,
    String,
    Table,
    and_,
    delete,
    exists,
    func,
    literal,
    literal_column,
    or_,
    union_all,
)
from sqlmodel import col, select

from server.kit.repository import Repository
from server.models import CatalogEntry, CatalogOffer
from server.models.search import SQLITE_TABLE

ANYWHERE_WEIGHT = 4
NAME_WEIGHT = 1

# The FTS5 table, for building queries only: it is not part of the models' metadata.
_FTS = Table(SQLITE_TABLE, MetaData(), SaColumn("entry_id", String), SaColumn("search_title", String))


class CatalogRepository(Repository[CatalogEntry]):
    model = CatalogEntry

    # -- listed entries, for the policy -------------------------------------------------------

    @staticmethod
    def _is_listed() -> ColumnElement[bool]:
        return and_(col(CatalogEntry.accepted_at).is_not(None), col(CatalogEntry.suspended_at).is_(None))

    def listed(self, host: str) -> CatalogEntry | None:
        """The entry for exactly `host`, if it is accepted and not suspended."""
        return self._first(self._statement().where(CatalogEntry.host == host, self._is_listed()))

    def listed_hosts(self) -> list[str]:
        """Every host listed (accepted, not suspended), in order."""
        return list(
            self.session.exec(
                select(CatalogEntry.host).where(self._is_listed()).order_by(col(CatalogEntry.host))
            )
        )

    def listed_pins(self) -> dict[str, frozenset[str]]:
        """Every listed host and its pinned payees (lower-case; none for a seller that rotates)."""
        rows = self.session.exec(
            select(CatalogEntry.host, CatalogEntry.pinned_pay_to).where(self._is_listed())
        ).all()
        return {host: frozenset(address.lower() for address in pins or ()) for host, pins in rows}

    # -- entries, for operators ---------------------------------------------------------------

    def by_id(self, entry_id: str) -> CatalogEntry | None:
        return self.session.get(CatalogEntry, entry_id)

    def by_host(self, host: str) -> CatalogEntry | None:
        return self._first(self._statement().where(CatalogEntry.host == host))

    def hosts_present(self, hosts: Iterable[str]) -> set[str]:
        wanted = sorted(set(hosts))
        if not wanted:
            return set()
        return set(self.session.exec(select(CatalogEntry.host).where(col(CatalogEntry.host).in_(wanted))))

    def all_entries(
        self, *, candidates: bool | None = None, suspended: bool | None = None
    ) -> list[CatalogEntry]:
        statement = self._statement()
        if candidates is not None:
            accepted = col(CatalogEntry.accepted_at)
            statement = statement.where(accepted.is_(None) if candidates else accepted.is_not(None))
        if suspended is not None:
            stopped = col(CatalogEntry.suspended_at)
            statement = statement.where(stopped.is_not(None) if suspended else stopped.is_(None))
        return list(self._all(statement.order_by(col(CatalogEntry.host))))

    def accepted_page(self, *, after: tuple[datetime, str] | None, limit: int) -> list[CatalogEntry]:
        """Accepted entries (listed or suspended), oldest first, after the (created_at, id) given."""
        created, entry_id = col(CatalogEntry.created_at), col(CatalogEntry.id)
        statement = self._statement().where(col(CatalogEntry.accepted_at).is_not(None))
        if after is not None:
            statement = statement.where(
                or_(created > after[0], and_(created == after[0], entry_id > after[1]))
            )
        return list(self._all(statement.order_by(created, entry_id).limit(limit)))

    def due_for_check(self, *, checked_before: datetime, limit: int) -> list[str]:
        """Entries not suspended whose last check is older than `checked_before` (or never was),
        the longest unchecked first."""
        checked = col(CatalogEntry.checked_at)
        return list(
            self.session.exec(
                select(CatalogEntry.id)
                .where(col(CatalogEntry.suspended_at).is_(None))
                .where((checked.is_(None)) | (checked < checked_before))
                .order_by(checked.is_not(None), checked, col(CatalogEntry.id))
                .limit(limit)
            )
        )

    def ids(self, *, include_suspended: bool) -> list[str]:
        statement = select(CatalogEntry.id)
        if not include_suspended:
            statement = statement.where(col(CatalogEntry.suspended_at).is_(None))
        return list(self.session.exec(statement.order_by(col(CatalogEntry.host))))

    # -- offers ------------------------------------------------------------------------------

    def offers_of(self, entry_ids: Iterable[str]) -> dict[str, list[CatalogOffer]]:
        wanted = sorted(set(entry_ids))
        found: dict[str, list[CatalogOffer]] = {entry_id: [] for entry_id in wanted}
        if not wanted:
            return found
        rows = self.session.exec(
            select(CatalogOffer)
            .where(col(CatalogOffer.entry_id).in_(wanted))
            .order_by(col(CatalogOffer.entry_id), col(CatalogOffer.network))
        )
        for row in rows:
            found[row.entry_id].append(row)
        return found

    def replace_offers(self, entry_id: str, offers: Sequence[CatalogOffer]) -> None:
        self.session.execute(delete(CatalogOffer).where(col(CatalogOffer.entry_id) == entry_id))
        for offer in offers:
            self.session.add(offer)
        self.session.flush()

    # -- full-text search ---------------------------------------------------------------------

    def _hits(
        self, term: str, *, name_only: bool, weight: int, filters: list[ColumnElement[bool]]
    ) -> Select[Any]:
        """Searchable entries with a word starting with `term` (in their name, with name_only),
        each with `weight`. The filters sit in every branch, so no branch joins a large result."""
        columns: tuple[ColumnElement[Any], ...] = (
            col(CatalogEntry.id).label("entry_id"),
            col(CatalogEntry.host).label("host"),
            col(CatalogEntry.verified_at).label("verified_at"),
            literal_column(str(weight)).label("weight"),
        )
        if self.session.get_bind().dialect.name == "postgresql":
            query = f"{term}:*A" if name_only else f"{term}:*"
            vector: ColumnElement[object] = literal_column("catalog_entries.search_vector")
            return select(*columns).where(
                vector.op("@@")(func.to_tsquery("simple", literal(query))), *filters
            )
        match = f'search_title : "{term}"*' if name_only else f'"{term}"*'
        return (
            select(*columns)
            .select_from(_FTS)
            .join(CatalogEntry, col(CatalogEntry.id) == _FTS.c.entry_id)
            .where(literal_column(SQLITE_TABLE).op("MATCH")(literal(match)), *filters)
        )

    @staticmethod
    def _searchable(
        *, fresh_since: datetime, category: str | None, network: str | None
    ) -> list[ColumnElement[bool]]:
        """Listed, verified since `fresh_since`, and of the category and network asked for."""
        conditions: list[ColumnElement[bool]] = [
            CatalogRepository._is_listed(),
            col(CatalogEntry.verified_at) >= fresh_since,
        ]
        if category is not None:
            conditions.append(col(CatalogEntry.category) == category)
        if network is not None:
            conditions.append(
                exists(
                    select(CatalogOffer.entry_id).where(
                        col(CatalogOffer.entry_id) == col(CatalogEntry.id), CatalogOffer.network == network
                    )
                )
            )
        return conditions

    def search(
        self,
        terms: Sequence[str],
        *,
        fresh_since: datetime,
        category: str | None,
        network: str | None,
        limit: int,
    ) -> tuple[int, list[tuple[CatalogEntry, int]]]:
        """How many entries match, and the `limit` most relevant (then freshest, then by host), with
        their relevance."""
        if not terms:
            return 0, []
        filters = self._searchable(fresh_since=fresh_since, category=category, network=network)
        branches = [
            self._hits(term, name_only=name_only, weight=weight, filters=filters)
            for term in terms
            for name_only, weight in ((False, ANYWHERE_WEIGHT), (True, NAME_WEIGHT))
        ]
        hits = union_all(*branches).subquery("hits")
        relevance = func.sum(hits.c.weight).label("relevance")
        ranked = self.session.execute(
            select(hits.c.entry_id, relevance, func.count().over().label("total"))
            .group_by(hits.c.entry_id, hits.c.host, hits.c.verified_at)
            .order_by(relevance.desc(), hits.c.verified_at.desc(), hits.c.host)
            .limit(limit)
        ).all()
        if not ranked:
            return 0, []
        found = {
            entry.id: entry
            for entry in self.session.exec(
                select(CatalogEntry).where(col(CatalogEntry.id).in_([row.entry_id for row in ranked]))
            )
        }
        return int(ranked[0].total), [(found[row.entry_id], int(row.relevance)) for row in ranked]
