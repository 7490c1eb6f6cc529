"""Every query on the catalog. The catalog is shared by every organisation, so it is not scoped."""

from __future__ import annotations

from sqlmodel import col, select

from server.kit.repository import Repository
from server.models import CatalogEntry


class CatalogRepository(Repository[CatalogEntry]):
    model = CatalogEntry

    def listed(self, host: str) -> CatalogEntry | None:
        """The entry for exactly `host`, unless it is suspended."""
        return self.first(
            self.statement().where(CatalogEntry.host == host, col(CatalogEntry.suspended_at).is_(None))
        )

    def listed_hosts(self) -> list[str]:
        """Every host listed and not suspended, in order."""
        return list(
            self.session.exec(
                select(CatalogEntry.host)
                .where(col(CatalogEntry.suspended_at).is_(None))
                .order_by(col(CatalogEntry.host))
            )
        )
