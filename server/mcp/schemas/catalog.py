"""search_paid_apis' result. A seller's own words are never in it: `sellerDescription` only says
that there is one, and the text goes in its own fenced block, labelled untrusted."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from server.mcp.content import fence
from server.mcp.schemas.common import timestamp, usd
from server.payments.discovery import Found, Sample, SearchOutcome
from server.vocabulary import PayToMode


class ReliabilityView(BaseModel):
    sample: Sample
    successRate: float | None  # served / sent over 30 days, from 0 to 1


class SellerDescription(BaseModel):
    untrusted: Literal[True] = True


class FoundSeller(BaseModel):
    id: str
    name: str
    host: str
    category: str
    summary: str
    url: str
    method: str
    exampleBody: str | None
    priceUsd: str
    network: str
    testnet: bool
    verifiedAt: str
    payToMode: PayToMode
    reliability: ReliabilityView
    allowedByPolicy: bool
    requiresApproval: bool
    policyBlockers: list[str]
    sellerDescription: SellerDescription | None = None


class SearchResult(BaseModel):
    agentId: str
    query: str
    total: int
    results: list[FoundSeller]


def _found(found: Found) -> FoundSeller:
    entry = found.item.entry
    rate = found.reliability.success_rate
    return FoundSeller(
        id=entry.id,
        name=entry.name,
        host=entry.host,
        category=entry.category,
        summary=entry.summary,
        url=entry.url,
        method=entry.method,
        exampleBody=entry.example_body,
        priceUsd=usd(found.offer.amount_atomic),
        network=found.offer.network,
        testnet=found.testnet,
        verifiedAt=timestamp(entry.verified_at) if entry.verified_at else "",
        payToMode=entry.pay_to_mode,
        reliability=ReliabilityView(
            sample=found.reliability.sample, successRate=None if rate is None else float(rate)
        ),
        allowedByPolicy=found.allowed,
        requiresApproval=found.requires_approval,
        policyBlockers=list(found.blockers),
        sellerDescription=SellerDescription() if entry.seller_description else None,
    )


def search(outcome: SearchOutcome) -> tuple[dict[str, Any], list[str]]:
    """The structured result, and one fenced block per seller that describes itself."""
    result = SearchResult(
        agentId=outcome.agent_id,
        query=outcome.query,
        total=outcome.total,
        results=[_found(found) for found in outcome.results],
    )
    fenced = [
        fence(
            found.item.entry.seller_description,
            what=f"the seller's description of itself, result {found.item.entry.id}",
            host=found.item.entry.host,
        )
        for found in outcome.results
        if found.item.entry.seller_description
    ]
    return result.model_dump(mode="json", exclude_none=False), fenced
