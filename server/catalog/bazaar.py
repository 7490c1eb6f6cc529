"""Import sellers from an x402 Bazaar: a facilitator's discovery endpoint, as candidates.

The protocol is the one Coinbase's x402 SDK speaks in its bazaar extension (`x402.extensions.
bazaar`, `BazaarExtension.list_resources`): `GET <facilitator>/discovery/resources?type=http&
limit=N&offset=M` answers `{"x402Version", "items": [...], "pagination": {"limit", "offset",
"total"}}`, each item a resource with its URL (`resource`), `type`, `x402Version`, its payment
options (`accepts`, as in a 402), and what its seller says of it (`description`, `serviceName`,
`tags`, and `extensions.bazaar.info` with the request's method, query parameters or body).

Every page is requested through the safe seller client. Everything in it is the seller's word:
an item becomes a candidate only with an offer Paywarden could pay (exact USDC on a supported
network, a whole amount), its name is its host until an operator names it, and what it says of
itself is kept only as untrusted text. Its method and example input make the example request,
which the verification then tries without paying.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
from sqlmodel import Session

from server.catalog.errors import DiscoveryUnreadable
from server.catalog.imports import Draft, ImportReport, Skipped, SkipReason, add_candidates, host_of_url
from server.catalog.service import METHODS, Offered
from server.catalog.verification import cheapest_per_network
from server.sellers.client import SellerClient, SellerRequest
from server.vocabulary import CatalogSource
from server.x402.challenge import Offer
from server.x402.selection import Selection, assess

DISCOVERY_PATH = "/discovery/resources"
PAGE_SIZE = 100
MAX_ITEMS = 5000
PROVISIONAL_CATEGORY = "uncategorised"
_BODY_METHODS = ("POST", "PUT", "PATCH")


@dataclass(frozen=True)
class Discovery:
    drafts: list[Draft]
    skipped: list[Skipped]
    pages: int


def discovery_url(base: str) -> str:
    """The list endpoint of a facilitator given by its base URL (or by the endpoint itself)."""
    base = base.rstrip("/")
    return base if base.endswith(DISCOVERY_PATH) else base + DISCOVERY_PATH


def _page_url(endpoint: str, *, limit: int, offset: int) -> str:
    parts = urlsplit(endpoint)
    query = [*parse_qsl(parts.query), ("type", "http"), ("limit", str(limit)), ("offset", str(offset))]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query), ""))


async def fetch_items(
    sellers: SellerClient, base: str, *, timeout_s: float, max_items: int = MAX_ITEMS
) -> tuple[list[Any], int]:
    """Every item the endpoint lists (up to `max_items`), page by page, and the number of pages."""
    endpoint = discovery_url(base)
    items: list[Any] = []
    pages = 0
    while len(items) < max_items:
        deadline = anyio.current_time() + timeout_s
        url = _page_url(endpoint, limit=min(PAGE_SIZE, max_items - len(items)), offset=len(items))
        response = await sellers.fetch(
            SellerRequest("GET", url, {"Accept": "application/json"}), deadline=deadline
        )
        if response.status != 200 or response.truncated:
            raise DiscoveryUnreadable()
        try:
            document = json.loads(response.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise DiscoveryUnreadable() from exc
        page = document.get("items") if isinstance(document, dict) else None
        if not isinstance(page, list):
            raise DiscoveryUnreadable()
        pages += 1
        items.extend(page)
        pagination = document.get("pagination")
        total = pagination.get("total") if isinstance(pagination, dict) else None
        if not page or (isinstance(total, int) and len(items) >= total):
            break
    return items[:max_items], pages


def _info(item: Mapping[str, Any]) -> Mapping[str, Any]:
    extensions = item.get("extensions")
    bazaar = extensions.get("bazaar") if isinstance(extensions, dict) else None
    info = bazaar.get("info") if isinstance(bazaar, dict) else None
    request = info.get("input") if isinstance(info, dict) else None
    return request if isinstance(request, dict) else {}


def _example(url: str, info: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """The example request (method, URL, body) an item's discovery information describes."""
    method = info.get("method")
    method = method.upper() if isinstance(method, str) and method.upper() in METHODS else "GET"
    body: str | None = None
    if method in _BODY_METHODS and isinstance(info.get("body"), dict | list):
        body = json.dumps(info["body"], separators=(",", ":"))
    params = info.get("queryParams")
    parts = urlsplit(url)
    if isinstance(params, dict) and not parts.query:
        simple = {str(k): str(v) for k, v in params.items() if isinstance(v, str | int | float)}
        url = urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(simple), ""))
    return method, url, body


def _seller_words(item: Mapping[str, Any]) -> str | None:
    """What the seller says of itself: kept, as untrusted text, for a fenced block only."""
    parts = [item.get("serviceName"), item.get("description")]
    tags = item.get("tags")
    if isinstance(tags, list):
        parts.append(" ".join(tag for tag in tags if isinstance(tag, str)))
    words = [part.strip() for part in parts if isinstance(part, str) and part.strip()]
    return "\n".join(words) or None


def read_items(items: list[Any], *, usdc_by_network: Mapping[str, str]) -> Discovery:
    drafts: list[Draft] = []
    skipped: list[Skipped] = []
    for position, item in enumerate(items):
        ref = f"#{position}"
        if not isinstance(item, dict) or not isinstance(item.get("resource"), str):
            skipped.append(Skipped(ref, SkipReason.NOT_HTTP))
            continue
        url = item["resource"]
        host = host_of_url(url)
        if item.get("type") != "http" or host is None:
            skipped.append(Skipped(host or ref, SkipReason.NOT_HTTP))
            continue
        version = item.get("x402Version")
        accepts = item.get("accepts")
        offers = [
            Offer(raw, 1 if version == 1 else 2)
            for raw in (accepts if isinstance(accepts, list) else [])[:64]
            if isinstance(raw, dict)
        ]
        payable = [
            outcome for offer in offers if isinstance(outcome := assess(offer, usdc_by_network), Selection)
        ]
        method, example_url, body = _example(url, _info(item))
        drafts.append(
            Draft(
                host=host,
                url=example_url,
                name=host,
                category=PROVISIONAL_CATEGORY,
                offers=tuple(
                    Offered(offer.network, offer.amount_atomic, offer.pay_to)
                    for offer in cheapest_per_network(payable)
                ),
                method=method,
                example_body=body,
                seller_description=_seller_words(item),
            )
        )
    return Discovery(drafts, skipped, 0)


async def discover(
    sellers: SellerClient, base: str, *, usdc_by_network: Mapping[str, str], timeout_s: float, max_items: int
) -> Discovery:
    items, pages = await fetch_items(sellers, base, timeout_s=timeout_s, max_items=max_items)
    found = read_items(items, usdc_by_network=usdc_by_network)
    return Discovery(found.drafts, found.skipped, pages)


def import_discovery(session: Session, found: Discovery, *, actor: str, now: datetime) -> ImportReport:
    """Add what a discovery endpoint listed as candidates (hosts already in the catalog are skipped)."""
    report = ImportReport(skipped=list(found.skipped))
    return add_candidates(
        session, found.drafts, source=CatalogSource.BAZAAR, actor=actor, now=now, report=report
    )
