"""Catalogs for tests: listed, verified sellers written as the verification would leave them, and
generated sellers by the hundred (or ten thousand, for the benchmark), deterministic by seed."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from server.catalog.repository import CatalogRepository
from server.catalog.service import add_entry
from server.catalog.text import host_words, searchable
from server.kit.db import Database
from server.kit.ids import new_id
from server.kit.money import usd_to_atomic
from server.models import CatalogEntry, CatalogOffer
from server.vocabulary import CatalogSource, PayToMode

# Topics of generated sellers, each with words a query can find. "weather" and "tide" are absent
# on purpose: tests add the sellers that should match them.
TOPICS: dict[str, tuple[str, ...]] = {
    "search": ("Web Search", "News Search", "Academic Search", "Image Search", "Patent Search"),
    "market-data": ("Crypto Prices", "Stock Quotes", "Forex Rates", "Commodity Prices", "Bond Yields"),
    "onchain-data": ("Token Balances", "NFT Holdings", "Wallet History", "Gas Tracker", "Block Explorer"),
    "scraping": ("Page Scraper", "Screenshot Service", "PDF Extractor", "Sitemap Crawler", "Link Checker"),
    "language": ("Translation", "Sentiment Analysis", "Summariser", "Spell Checker", "Entity Extraction"),
    "media": ("Image Resizer", "Audio Transcription", "Video Thumbnails", "OCR", "Text to Speech"),
}
ADJECTIVES = ("Fast", "Open", "Prime", "Quick", "Bright", "Clear", "Solid", "Smart", "Lean", "True")
SUMMARIES = {
    "search": "Ranked results with titles, links and snippets for a query.",
    "market-data": "Latest quotes and daily history, in US dollars.",
    "onchain-data": "Reads balances, holdings and transfers from public chains.",
    "scraping": "Fetches public pages and returns clean text or images.",
    "language": "Processes text in dozens of languages.",
    "media": "Converts and analyses images, audio and video.",
}


@dataclass(frozen=True)
class Listed:
    entry_id: str
    host: str


def list_seller(
    db: Database,
    *,
    host: str,
    name: str,
    category: str,
    summary: str,
    now: datetime,
    verified_at: datetime | None,
    offers: list[tuple[str, str, str]],  # (network, price in USD, payee asked for)
    pinned: list[str] | None = None,
    seller_description: str | None = None,
    accepted: bool = True,
) -> Listed:
    """A seller as a passed verification leaves it: its offers with the payees it asked for."""
    network, price, _ = offers[0]
    with db.write() as session:
        entry = add_entry(
            session,
            name=name,
            host=host,
            url=f"https://{host}/v1/{category}",
            price_usd=Decimal(price),
            network=network,
            category=category,
            pay_to=pinned or [],
            actor="test",
            now=now,
            summary=summary,
            seller_description=seller_description,
            accepted=accepted,
        )
        entry.verified_at = verified_at
        entry.checked_at = verified_at
        entry.observed_pay_to = sorted({payee.lower() for _, _, payee in offers})
        CatalogRepository(session).replace_offers(
            entry.id,
            [
                CatalogOffer(
                    entry_id=entry.id, network=n, amount_atomic=usd_to_atomic(Decimal(p)), pay_to=payee
                )
                for n, p, payee in offers
            ],
        )
        return Listed(entry.id, entry.host)


def generated_rows(count: int, *, now: datetime, seed: int = 7) -> list[tuple[CatalogEntry, CatalogOffer]]:
    """`count` listed, freshly verified sellers across TOPICS, with their offer, as rows."""
    rng = random.Random(seed)
    rows: list[tuple[CatalogEntry, CatalogOffer]] = []
    topics = list(TOPICS.items())
    for number in range(count):
        category, names = topics[number % len(topics)]
        name = f"{rng.choice(ADJECTIVES)} {rng.choice(names)} {number}"
        host = f"s{number}.{category}.gen.example"
        payee = f"0x{number:040x}"
        entry = CatalogEntry(
            id=new_id("catalog"),
            host=host,
            name=name,
            url=f"https://{host}/v1/{category}",
            method="GET",
            category=category,
            summary=SUMMARIES[category],
            source=CatalogSource.ADMIN,
            pay_to_mode=PayToMode.PINNED,
            pinned_pay_to=[payee],
            observed_pay_to=[payee],
            created_by="test",
            created_at=now,
            accepted_at=now,
            verified_at=now,
            checked_at=now,
            search_title=searchable(name),
            search_body=searchable(category, SUMMARIES[category], host_words(host)),
        )
        network = "eip155:8453" if rng.random() < 0.3 else "eip155:84532"
        price = rng.choice((1_000, 5_000, 10_000, 20_000, 50_000))
        rows.append(
            (entry, CatalogOffer(entry_id=entry.id, network=network, amount_atomic=price, pay_to=payee))
        )
    return rows


def generate_catalog(db: Database, count: int, *, now: datetime, seed: int = 7, batch: int = 1000) -> None:
    rows = generated_rows(count, now=now, seed=seed)
    for start in range(0, len(rows), batch):
        with db.write() as session:
            for entry, _ in rows[start : start + batch]:
                session.add(entry)
            session.flush()
            for _, offer in rows[start : start + batch]:
                session.add(offer)
