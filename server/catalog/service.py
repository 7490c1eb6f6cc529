"""Add sellers to the catalog and look them up for the policy.

A host matches the catalog only exactly: no wildcard, no subdomain, no port. A seller's pinned
payees are the addresses it may be paid at; a seller without pinned payees rotates its address.
Searching the catalog and re-verifying sellers without paying come later. Entry points render
entries themselves (the CLI in server/cli/schemas.py).
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

from sqlmodel import Session

from server.catalog.repository import CatalogRepository
from server.kit.errors import InputReason, InvalidInput, PaywardenError
from server.kit.ids import new_id
from server.kit.money import usd_to_atomic
from server.models import CatalogEntry
from server.models.enums import PayToMode
from server.policy.engine import CatalogListing
from server.policy.hosts import HostPatternError, normalize_host
from server.settings import SUPPORTED_NETWORKS

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_CATEGORY = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")


class HostAlreadyListed(PaywardenError):
    code = "host_already_listed"
    message = "That host is already in the catalog."


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
) -> CatalogEntry:
    try:
        clean_host = normalize_host(host)
    except HostPatternError as exc:
        raise InvalidInput(InputReason.INVALID_HOST) from exc
    if "*" in clean_host or ":" in clean_host:
        raise InvalidInput(InputReason.INVALID_HOST)
    parts = urlsplit(url)
    try:
        url_host = normalize_host(parts.hostname or "")
    except HostPatternError:
        url_host = None
    if parts.scheme not in ("https", "http") or url_host != clean_host:
        raise InvalidInput(InputReason.URL_NOT_ON_HOST)
    if network not in SUPPORTED_NETWORKS:
        raise InvalidInput(InputReason.INVALID_NETWORK)
    if not _CATEGORY.match(category):
        raise InvalidInput(InputReason.INVALID_CATEGORY)
    if not 1 <= len(name.strip()) <= 120:
        raise InvalidInput(InputReason.INVALID_NAME)
    if any(not _ADDRESS.match(address) for address in pay_to):
        raise InvalidInput(InputReason.INVALID_PAY_TO)
    pinned = sorted({address.lower() for address in pay_to})
    entry = CatalogEntry(
        id=new_id("catalog"),
        host=clean_host,
        name=name.strip(),
        url=url,
        price_atomic=usd_to_atomic(price_usd),
        network=network,
        category=category,
        pay_to_mode=PayToMode.PINNED if pinned else PayToMode.ROTATING,
        pinned_pay_to=pinned,
        created_by=actor,
        created_at=now,
    )
    if not CatalogRepository(session).add_unique(entry):
        raise HostAlreadyListed()
    return entry


def find_listed(session: Session, host: str) -> CatalogEntry | None:
    """The entry for exactly `host`, unless it is suspended."""
    return CatalogRepository(session).listed(host)


def listing_for(session: Session, host: str) -> CatalogListing | None:
    """What the policy needs to know about `host`: listed or not, and its pinned payees."""
    entry = find_listed(session, host)
    if entry is None:
        return None
    return CatalogListing(frozenset(entry.pinned_pay_to))


def listed_hosts(session: Session) -> list[str]:
    return CatalogRepository(session).listed_hosts()
