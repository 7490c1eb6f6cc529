"""Add imported sellers as candidates: listed only once verified and accepted by an operator.

Imports (a seed file, an x402 Bazaar discovery endpoint) only ever add candidates, never change an
entry that exists: a host already in the catalog is skipped, whatever it is now.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlsplit

from sqlmodel import Session

from server.catalog.errors import HostAlreadyListed
from server.catalog.repository import CatalogRepository
from server.catalog.service import Offered, add_entry, clean_host
from server.kit.errors import InvalidInput
from server.kit.money import atomic_to_usd
from server.models import CatalogEntry
from server.vocabulary import CatalogSource


class SkipReason:
    """Why an imported item did not become a candidate (codes, as the report prints them)."""

    ALREADY_IN_CATALOG = "already_in_catalog"
    DUPLICATE_HOST = "duplicate_host"  # a second resource on a host the import already took
    NOT_HTTP = "not_http"
    NO_PAYABLE_OFFER = "no_payable_offer"


@dataclass(frozen=True)
class Draft:
    """One seller to add as a candidate, in the import's own terms."""

    host: str
    url: str
    name: str
    category: str
    offers: tuple[Offered, ...]
    method: str = "GET"
    example_body: str | None = None
    summary: str = ""
    seller_description: str | None = None


@dataclass(frozen=True)
class Skipped:
    ref: str  # the host, or the item's position when it has none
    reason: str


@dataclass
class ImportReport:
    added: list[CatalogEntry] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def add_candidates(
    session: Session,
    drafts: Sequence[Draft],
    *,
    source: CatalogSource,
    actor: str,
    now: datetime,
    report: ImportReport | None = None,
) -> ImportReport:
    report = report or ImportReport()
    taken: set[str] = set()
    present = CatalogRepository(session).hosts_present(draft.host for draft in drafts)
    for draft in drafts:
        if not draft.offers:
            report.skipped.append(Skipped(draft.host, SkipReason.NO_PAYABLE_OFFER))
            continue
        if draft.host in present:
            report.skipped.append(Skipped(draft.host, SkipReason.ALREADY_IN_CATALOG))
            continue
        if draft.host in taken:
            report.skipped.append(Skipped(draft.host, SkipReason.DUPLICATE_HOST))
            continue
        first, *others = sorted(draft.offers, key=lambda offer: (offer.amount_atomic, offer.network))
        try:
            entry = add_entry(
                session,
                name=draft.name,
                host=draft.host,
                url=draft.url,
                price_usd=atomic_to_usd(first.amount_atomic),
                network=first.network,
                category=draft.category,
                pay_to=[],
                actor=actor,
                now=now,
                method=draft.method,
                example_body=draft.example_body,
                summary=draft.summary,
                seller_description=draft.seller_description,
                source=source,
                accepted=False,
                extra_offers=others,
            )
        except InvalidInput as exc:
            report.skipped.append(Skipped(draft.host, str(exc.reason)))
            continue
        except HostAlreadyListed:
            report.skipped.append(Skipped(draft.host, SkipReason.ALREADY_IN_CATALOG))
            continue
        taken.add(draft.host)
        report.added.append(entry)
    return report


def host_of_url(url: str) -> str | None:
    try:
        return clean_host(urlsplit(url).hostname or "")
    except (InvalidInput, ValueError):
        return None
