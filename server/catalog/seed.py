"""Seed files: known public x402 sellers, as facts an operator can import as candidates.

A seed file is JSON: `{"format": "paywarden-catalog-seed/1", "sellers": [...]}`, each seller with
`name`, `host`, `url`, `priceUsd`, `network` and `category`, and optionally `method`, `body`,
`summary` and `source` (where the facts were published). Only facts and our own words: no payees
(a verification reads them from the seller's own 402) and nothing the seller wrote about itself.
The file shipped with Paywarden is `server/catalog/seed/sellers.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import Session

from server.catalog.errors import SeedFileInvalid
from server.catalog.imports import Draft, ImportReport, Skipped, add_candidates, host_of_url
from server.catalog.service import Offered
from server.kit.errors import InputReason
from server.kit.money import AmountError, parse_usd, usd_to_atomic
from server.vocabulary import CatalogSource

SEED_FORMAT = "paywarden-catalog-seed/1"
SHIPPED_SEED = Path(__file__).with_name("seed") / "sellers.json"
MAX_SEED_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SeedFile:
    drafts: list[Draft]
    invalid: list[Skipped]


def _text(item: dict[str, Any], key: str, default: str | None = None) -> str | None:
    value = item.get(key, default)
    return value if isinstance(value, str) else default


def _json(body: Any) -> str | None:
    return json.dumps(body, separators=(",", ":")) if isinstance(body, dict | list) else None


def parse_seed(raw: bytes) -> SeedFile:
    if len(raw) > MAX_SEED_BYTES:
        raise SeedFileInvalid()
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SeedFileInvalid() from exc
    if not isinstance(document, dict) or document.get("format") != SEED_FORMAT:
        raise SeedFileInvalid()
    sellers = document.get("sellers")
    if not isinstance(sellers, list):
        raise SeedFileInvalid()
    drafts: list[Draft] = []
    invalid: list[Skipped] = []
    for position, item in enumerate(sellers):
        ref = f"#{position}"
        if not isinstance(item, dict):
            invalid.append(Skipped(ref, str(InputReason.INVALID_URL)))
            continue
        url = _text(item, "url") or ""
        host = host_of_url(url)
        declared = (_text(item, "host") or "").lower()
        if host is None or host != declared:
            invalid.append(Skipped(declared or ref, str(InputReason.URL_NOT_ON_HOST)))
            continue
        try:
            price = usd_to_atomic(parse_usd(item.get("priceUsd")))
        except AmountError:
            invalid.append(Skipped(host, str(InputReason.INVALID_AMOUNT)))
            continue
        body = item.get("body")
        drafts.append(
            Draft(
                host=host,
                url=url,
                name=_text(item, "name") or host,
                category=_text(item, "category") or "",
                offers=(Offered(_text(item, "network") or "", price),),
                method=_text(item, "method", "GET") or "GET",
                example_body=json.dumps(body, separators=(",", ":"))
                if isinstance(body, dict | list)
                else None,
                summary=_text(item, "summary") or "",
            )
        )
    return SeedFile(drafts, invalid)


def read_seed(path: Path) -> SeedFile:
    try:
        return parse_seed(path.read_bytes())
    except OSError as exc:
        raise SeedFileInvalid() from exc


def import_seed(session: Session, seed: SeedFile, *, actor: str, now: datetime) -> ImportReport:
    """Add the seed's sellers as candidates (hosts already in the catalog are skipped)."""
    report = ImportReport(skipped=list(seed.invalid))
    return add_candidates(
        session, seed.drafts, source=CatalogSource.SEED, actor=actor, now=now, report=report
    )
