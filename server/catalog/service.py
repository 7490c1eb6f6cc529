"""Keep the catalog: add, edit, accept, suspend and resume sellers, and look them up for the policy.

A host matches the catalog only exactly: no wildcard, no subdomain, no port. A seller's pinned
payees are the addresses it may be paid at; a seller without pinned payees rotates its address.
An entry is *listed* (the policy's catalog rules see it) once an operator accepted it and while
it is not suspended; imported sellers start as candidates. Every text an agent may read as ours
(name, category, summary) is the operator's; what a seller says of itself is kept apart, as
untrusted text. Entry points render entries themselves (the CLI in server/cli/schemas.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

from sqlmodel import Session

from server.catalog.errors import EntryNotFound, HostAlreadyListed, NotACandidate, PayeesUnknown
from server.catalog.repository import CatalogRepository
from server.catalog.text import host_words, searchable
from server.kit.errors import InputReason, InvalidInput
from server.kit.ids import new_id
from server.kit.money import AmountError, usd_to_atomic
from server.models import CatalogEntry, CatalogOffer
from server.policy.engine import CatalogListing
from server.policy.hosts import HostPatternError, normalize_host
from server.settings import SUPPORTED_NETWORKS
from server.vocabulary import CatalogSource, PayToMode, SuspensionReason

__all__ = ["EntryNotFound", "HostAlreadyListed", "NotACandidate", "PayeesUnknown"]

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
MAX_URL_LENGTH = 2048
MAX_EXAMPLE_BODY = 16 * 1024
MAX_SUMMARY = 500
MAX_SELLER_DESCRIPTION = 2000

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_CATEGORY = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


@dataclass(frozen=True)
class Offered:
    """A price on one network, as an operator declares it or a verification reads it."""

    network: str
    amount_atomic: int
    pay_to: str | None = None


@dataclass(frozen=True)
class Listing:
    """An entry with its offers: what commands print and search ranks."""

    entry: CatalogEntry
    offers: tuple[CatalogOffer, ...]


@dataclass(frozen=True)
class EntryChanges:
    """An operator's edit; None leaves a field as it is."""

    name: str | None = None
    url: str | None = None
    method: str | None = None
    example_body: str | None = None
    clear_example_body: bool = False
    category: str | None = None
    summary: str | None = None
    price_usd: Decimal | None = None
    network: str | None = None
    pay_to: Sequence[str] | None = None  # pins these payees (replacing the pinned list)
    # price_usd and network come together: they set (or replace) the price on that network.
    rotating: bool = False  # the seller rotates its address: unpin every payee


# -- validation ------------------------------------------------------------------------------


def clean_host(host: str) -> str:
    try:
        clean = normalize_host(host)
    except HostPatternError as exc:
        raise InvalidInput(InputReason.INVALID_HOST) from exc
    if "*" in clean or ":" in clean or "/" in clean or not clean:
        raise InvalidInput(InputReason.INVALID_HOST)
    return clean


def _clean_url(url: str, host: str) -> str:
    if len(url) > MAX_URL_LENGTH or any(ch.isspace() for ch in url):
        raise InvalidInput(InputReason.INVALID_URL)
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as exc:
        raise InvalidInput(InputReason.INVALID_URL) from exc
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(InputReason.URL_CREDENTIALS)
    try:
        url_host: str | None = normalize_host(parts.hostname or "")
    except HostPatternError:
        url_host = None
    if parts.scheme not in ("https", "http") or url_host != host:
        raise InvalidInput(InputReason.URL_NOT_ON_HOST)
    return url


def _clean_method(method: str) -> str:
    upper = method.strip().upper()
    if upper not in METHODS:
        raise InvalidInput(InputReason.INVALID_METHOD)
    return upper


def _clean_body(method: str, body: str | None) -> str | None:
    if body is None or body == "":
        return None
    if method in ("GET", "HEAD"):
        raise InvalidInput(InputReason.BODY_NOT_ALLOWED)
    if len(body.encode()) > MAX_EXAMPLE_BODY:
        raise InvalidInput(InputReason.BODY_TOO_LARGE)
    return body


def _clean_name(name: str) -> str:
    clean = " ".join(name.split())
    if not 1 <= len(clean) <= 120 or not clean.isprintable():
        raise InvalidInput(InputReason.INVALID_NAME)
    return clean


def is_category(text: str) -> bool:
    return bool(_CATEGORY.match(text))


def _clean_category(category: str) -> str:
    if not is_category(category):
        raise InvalidInput(InputReason.INVALID_CATEGORY)
    return category


def _clean_summary(summary: str) -> str:
    clean = " ".join(summary.split())
    if len(clean) > MAX_SUMMARY or not clean.isprintable():
        raise InvalidInput(InputReason.INVALID_SUMMARY)
    return clean


def _clean_network(network: str) -> str:
    if network not in SUPPORTED_NETWORKS:
        raise InvalidInput(InputReason.INVALID_NETWORK)
    return network


def _clean_price(price_usd: Decimal) -> int:
    try:
        amount = usd_to_atomic(price_usd)
    except AmountError as exc:
        raise InvalidInput(InputReason.INVALID_AMOUNT) from exc
    if amount <= 0:
        raise InvalidInput(InputReason.INVALID_AMOUNT)
    return amount


def clean_payees(pay_to: Sequence[str]) -> list[str]:
    if any(not _ADDRESS.match(address) for address in pay_to):
        raise InvalidInput(InputReason.INVALID_PAY_TO)
    return sorted({address.lower() for address in pay_to})


def untrusted_text(text: str | None) -> str | None:
    """A seller's words, kept as they are but bounded; never shown outside a fenced block."""
    if text is None or not text.strip():
        return None
    return text.strip()[:MAX_SELLER_DESCRIPTION]


def _index(entry: CatalogEntry) -> None:
    """Our own words of the entry, as the full-text index reads them."""
    entry.search_title = searchable(entry.name)
    entry.search_body = searchable(entry.category, entry.summary, host_words(entry.host))


# -- writing ---------------------------------------------------------------------------------


def add_entry(
    session: Session,
    *,
    name: str,
    host: str,
    url: str,
    price_usd: Decimal,
    network: str,
    category: str,
    pay_to: list[str],
    actor: str,
    now: datetime,
    method: str = "GET",
    example_body: str | None = None,
    summary: str = "",
    seller_description: str | None = None,
    source: CatalogSource = CatalogSource.ADMIN,
    accepted: bool = True,
    extra_offers: Sequence[Offered] = (),
) -> CatalogEntry:
    """Add a seller: listed at once when `accepted`, else a candidate for an operator to accept."""
    host = clean_host(host)
    clean_method = _clean_method(method)
    pinned = clean_payees(pay_to)
    offers = [Offered(_clean_network(network), _clean_price(price_usd))]
    for extra in extra_offers:
        if extra.network not in {offer.network for offer in offers} and extra.amount_atomic > 0:
            offers.append(Offered(_clean_network(extra.network), extra.amount_atomic, extra.pay_to))
    entry = CatalogEntry(
        id=new_id("catalog"),
        host=host,
        name=_clean_name(name),
        url=_clean_url(url, host),
        method=clean_method,
        example_body=_clean_body(clean_method, example_body),
        category=_clean_category(category),
        summary=_clean_summary(summary),
        seller_description=untrusted_text(seller_description),
        source=source,
        pay_to_mode=PayToMode.PINNED if pinned else PayToMode.ROTATING,
        pinned_pay_to=pinned,
        observed_pay_to=[],
        created_by=actor,
        created_at=now,
        accepted_at=now if accepted else None,
    )
    _index(entry)
    repository = CatalogRepository(session)
    if not repository.add_unique(entry):
        raise HostAlreadyListed()
    repository.replace_offers(
        entry.id,
        [
            CatalogOffer(entry_id=entry.id, network=o.network, amount_atomic=o.amount_atomic, pay_to=o.pay_to)
            for o in offers
        ],
    )
    return entry


def find_entry(session: Session, ref: str) -> CatalogEntry:
    """An entry by id, or by its exact host."""
    repository = CatalogRepository(session)
    entry = repository.by_id(ref)
    if entry is None:
        try:
            entry = repository.by_host(clean_host(ref))
        except InvalidInput:
            entry = None
    if entry is None:
        raise EntryNotFound()
    return entry


def edit_entry(session: Session, ref: str, *, changes: EntryChanges) -> CatalogEntry:
    entry = find_entry(session, ref)
    if changes.name is not None:
        entry.name = _clean_name(changes.name)
    if changes.url is not None:
        entry.url = _clean_url(changes.url, entry.host)
    if changes.method is not None:
        entry.method = _clean_method(changes.method)
    if changes.clear_example_body:
        entry.example_body = None
    elif changes.example_body is not None:
        entry.example_body = _clean_body(entry.method, changes.example_body)
    if entry.example_body is not None:
        _clean_body(entry.method, entry.example_body)
    if changes.category is not None:
        entry.category = _clean_category(changes.category)
    if changes.summary is not None:
        entry.summary = _clean_summary(changes.summary)
    if changes.rotating:
        entry.pinned_pay_to = []
        entry.pay_to_mode = PayToMode.ROTATING
    elif changes.pay_to is not None:
        _pin(entry, clean_payees(changes.pay_to))
    if changes.price_usd is not None or changes.network is not None:
        # A price is always for a network: the pair sets (or replaces) that network's offer.
        if changes.price_usd is None:
            raise InvalidInput(InputReason.INVALID_AMOUNT)
        if changes.network is None:
            raise InvalidInput(InputReason.INVALID_NETWORK)
        network, amount = _clean_network(changes.network), _clean_price(changes.price_usd)
        repository = CatalogRepository(session)
        offers = [
            CatalogOffer(
                entry_id=o.entry_id, network=o.network, amount_atomic=o.amount_atomic, pay_to=o.pay_to
            )
            for o in repository.offers_of([entry.id])[entry.id]
            if o.network != network
        ]
        offers.append(CatalogOffer(entry_id=entry.id, network=network, amount_atomic=amount))
        repository.replace_offers(entry.id, offers)
    _index(entry)
    session.add(entry)
    session.flush()
    return entry


def _pin(entry: CatalogEntry, payees: list[str]) -> None:
    entry.pinned_pay_to = payees
    entry.pay_to_mode = PayToMode.PINNED if payees else PayToMode.ROTATING


def accept_candidate(
    session: Session,
    ref: str,
    *,
    summary: str,
    name: str | None,
    category: str | None,
    pay_to: Sequence[str],
    rotating: bool,
    now: datetime,
) -> CatalogEntry:
    """An operator lists a candidate, in their own words, with its payees pinned (by default the
    ones the last verification saw) or as a seller that rotates its address."""
    entry = find_entry(session, ref)
    if entry.accepted_at is not None:
        raise NotACandidate()
    entry.summary = _clean_summary(summary)
    if name is not None:
        entry.name = _clean_name(name)
    if category is not None:
        entry.category = _clean_category(category)
    if rotating:
        _pin(entry, [])
    else:
        payees = clean_payees(pay_to) if pay_to else clean_payees(entry.observed_pay_to)
        if not payees:
            raise PayeesUnknown()
        _pin(entry, payees)
    entry.accepted_at = now
    _index(entry)
    session.add(entry)
    session.flush()
    return entry


def suspend(session: Session, ref: str, *, reason: SuspensionReason, now: datetime) -> CatalogEntry:
    entry = find_entry(session, ref)
    if entry.suspended_at is None:
        entry.suspended_at = now
        entry.suspension_reason = reason
        session.add(entry)
        session.flush()
    return entry


def resume(session: Session, ref: str) -> CatalogEntry:
    """Lift a suspension. The seller shows in search again once a verification passes."""
    entry = find_entry(session, ref)
    entry.suspended_at = None
    entry.suspension_reason = None
    session.add(entry)
    session.flush()
    return entry


# -- reading ---------------------------------------------------------------------------------


def listings(session: Session, entries: Sequence[CatalogEntry]) -> list[Listing]:
    offers = CatalogRepository(session).offers_of(entry.id for entry in entries)
    return [Listing(entry, tuple(offers.get(entry.id, ()))) for entry in entries]


def listing(session: Session, entry: CatalogEntry) -> Listing:
    return listings(session, [entry])[0]


def entries(
    session: Session, *, candidates: bool | None = None, suspended: bool | None = None
) -> list[CatalogEntry]:
    return CatalogRepository(session).all_entries(candidates=candidates, suspended=suspended)


def accepted_page(session: Session, *, after: tuple[datetime, str] | None, limit: int) -> list[Listing]:
    """One page of the accepted entries (listed or suspended) with their offers, oldest first."""
    return listings(session, CatalogRepository(session).accepted_page(after=after, limit=limit))


def find_accepted(session: Session, entry_id: str) -> Listing:
    """An accepted entry by id, with its offers; a candidate is not found."""
    entry = CatalogRepository(session).by_id(entry_id) if len(entry_id) <= 40 else None
    if entry is None or entry.accepted_at is None:
        raise EntryNotFound()
    return listing(session, entry)


def find_listed(session: Session, host: str) -> CatalogEntry | None:
    """The entry for exactly `host`, if it is accepted and not suspended."""
    return CatalogRepository(session).listed(host)


def listing_of(entry: CatalogEntry) -> CatalogListing:
    """What the policy needs to know of a listed entry: its pinned payees."""
    return CatalogListing(frozenset(entry.pinned_pay_to))


def listing_for(session: Session, host: str) -> CatalogListing | None:
    """What the policy needs to know about `host`: listed or not, and its pinned payees."""
    entry = find_listed(session, host)
    return None if entry is None else listing_of(entry)


def listed_hosts(session: Session) -> list[str]:
    return CatalogRepository(session).listed_hosts()


def listed_pins(session: Session) -> dict[str, frozenset[str]]:
    """Every listed host with its pinned payees, lower-case (empty for a seller that rotates): what
    a wallet's own policy can pin (server/wallet_policies/)."""
    return CatalogRepository(session).listed_pins()


def search_listed(
    session: Session,
    terms: Sequence[str],
    *,
    fresh_since: datetime,
    category: str | None,
    network: str | None,
    limit: int,
) -> tuple[int, list[tuple[Listing, int]]]:
    """Listed entries verified since `fresh_since` whose own words match `terms`: how many, and
    the `limit` most relevant with their offers and relevance (see repository.py for the score)."""
    total, rows = CatalogRepository(session).search(
        terms, fresh_since=fresh_since, category=category, network=network, limit=limit
    )
    found = listings(session, [entry for entry, _ in rows])
    return total, [(item, relevance) for item, (_, relevance) in zip(found, rows, strict=True)]
