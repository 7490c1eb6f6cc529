"""search_paid_apis: catalog sellers that match what the agent asks for, each judged by the
agent's own policy exactly as fetch_paid would judge a payment to it now.

The catalog finds candidates by full-text relevance on our own words (server/catalog); each is
then judged by the policy engine with the agent's standing (policy, rules, spend counted now, as
`ledger.decide` reads them) and the context fetch_paid would have (the catalog's listing of the
host, whether the organisation paid that payee before). The catalog never widens what an agent
may pay: a listed seller is only as payable as the policy makes it.

Ranking, in order: relevance; policy fit (payable at once, then payable after a person's
approval, then blocked); measured reliability (a seller without enough measurements ranks as if
it served 90 % of payments); freshness of the last verification, in 6-hour steps; price; name.
Results whose last verification is older than 24 hours never show. There are no paid placements.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from sqlmodel import Session

from auth.principal import Principal
from server.catalog.service import Listing, is_category, listing_of, search_listed
from server.catalog.text import query_terms
from server.kit.errors import InputReason, InvalidInput
from server.models import Agent, CatalogOffer
from server.payments.ledger import Standing, standing
from server.payments.repository import IntentRepository
from server.payments.usage import context_of
from server.policy.engine import Payment
from server.policy.service import PolicyNotFound
from server.settings import BASE_SEPOLIA, SUPPORTED_NETWORKS
from server.tenancy.service import get_agent
from server.vocabulary import HoldReason

MAX_QUERY = 200
DEFAULT_LIMIT = 5
MAX_LIMIT = 10
FRESH_FOR = timedelta(hours=24)
CANDIDATES = 200  # the most relevant entries that are judged and ranked
RELIABILITY_WINDOW = timedelta(days=30)
MIN_ORGANISATIONS = 5
MIN_PAYMENTS = 20
UNMEASURED_RATE = Decimal("0.90")
FRESHNESS_STEP = timedelta(hours=6)
NO_POLICY = "no_policy"


class Sample(StrEnum):
    SUFFICIENT = "sufficient"
    INSUFFICIENT = "insufficient"


@dataclass(frozen=True)
class Reliability:
    sample: Sample
    success_rate: Decimal | None  # served / sent, over 30 days, when the sample is sufficient


@dataclass(frozen=True)
class SearchInput:
    query: str
    category: str | None = None
    network: str | None = None
    limit: int = DEFAULT_LIMIT


@dataclass(frozen=True)
class Found:
    """One seller, as the agent could pay it now."""

    item: Listing
    offer: CatalogOffer  # the price on the network fetch_paid would pay on
    relevance: int
    reliability: Reliability
    allowed: bool
    requires_approval: bool
    blockers: tuple[str, ...]
    hold_reason: HoldReason | None = None

    @property
    def testnet(self) -> bool:
        return self.offer.network == BASE_SEPOLIA


@dataclass(frozen=True)
class SearchOutcome:
    agent_id: str
    query: str
    total: int
    results: list[Found]


def validate_search(arguments: dict[str, Any]) -> SearchInput:
    query = arguments.get("query")
    if not isinstance(query, str) or not 1 <= len(query.strip()) <= MAX_QUERY:
        raise InvalidInput(InputReason.INVALID_QUERY)
    category = arguments.get("category")
    if category is not None and (not isinstance(category, str) or not is_category(category)):
        raise InvalidInput(InputReason.INVALID_CATEGORY)
    network = arguments.get("network")
    if network is not None and network not in SUPPORTED_NETWORKS:
        raise InvalidInput(InputReason.INVALID_NETWORK)
    limit = arguments.get("limit")
    if limit is None:
        limit = DEFAULT_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(InputReason.INVALID_LIMIT)
    return SearchInput(query.strip(), category, network, limit)


def reliability_of(session: Session, hosts: list[str], *, now: datetime) -> dict[str, Reliability]:
    """Each host's success rate of real payments through Paywarden over 30 days, across every
    organisation, shown only when at least 5 organisations made at least 20 payments in all."""
    outcomes = IntentRepository(session).seller_outcomes(hosts=hosts, since=now - RELIABILITY_WINDOW)
    measured: dict[str, Reliability] = {}
    for host in hosts:
        seen = outcomes.get(host)
        if seen is None or seen.organisations < MIN_ORGANISATIONS or seen.payments < MIN_PAYMENTS:
            measured[host] = Reliability(Sample.INSUFFICIENT, None)
            continue
        rate = (Decimal(seen.served) / Decimal(seen.payments)).quantize(Decimal("0.0001"), ROUND_HALF_EVEN)
        measured[host] = Reliability(Sample.SUFFICIENT, rate)
    return measured


def _offer_for(item: Listing, networks: tuple[str, ...], wanted: str | None) -> CatalogOffer | None:
    """The offer fetch_paid would pay: on the agent's networks when the seller takes one, cheapest."""
    offers = [offer for offer in item.offers if wanted is None or offer.network == wanted]
    preferred = [offer for offer in offers if offer.network in networks] or offers
    return min(preferred, key=lambda offer: (offer.amount_atomic, offer.network), default=None)


def _payment(item: Listing, offer: CatalogOffer) -> Payment:
    """The payment fetch_paid would make to this seller's example request, as the policy sees it."""
    entry = item.entry
    return Payment(
        host=entry.host,
        path=urlsplit(entry.url).path or "/",
        network=offer.network,
        asset="USDC",
        pay_to=offer.pay_to or "",
        amount_atomic=offer.amount_atomic,
        resource_host=entry.host,
        instruction_like_description=entry.instruction_like,
    )


def _judge(
    agent: Agent, current: Standing | None, item: Listing, offer: CatalogOffer, known: set[str]
) -> tuple[bool, bool, tuple[str, ...], HoldReason | None]:
    if current is None:
        return False, False, (NO_POLICY,), None
    pay_to = (offer.pay_to or "").lower()
    context = context_of(agent, listing=listing_of(item.entry), pay_to_known=pay_to in known)
    decision = current.judge(_payment(item, offer), context)
    if decision.outcome == "deny":
        return False, False, decision.reasons, None
    return True, decision.outcome == "hold", (), decision.hold_reason


def _rank(found: Found, now: datetime) -> tuple[Any, ...]:
    fit = 0 if found.allowed and not found.requires_approval else 1 if found.allowed else 2
    rate = found.reliability.success_rate
    verified_at = found.item.entry.verified_at or now
    freshness = int((now - verified_at) / FRESHNESS_STEP)
    return (
        -found.relevance,
        fit,
        -(rate if rate is not None else UNMEASURED_RATE).quantize(Decimal("0.01")),
        freshness,
        found.offer.amount_atomic,
        found.item.entry.name.lower(),
        found.item.entry.host,
    )


def search_paid_apis(
    session: Session, principal: Principal, *, agent_id: str, request: SearchInput, now: datetime
) -> SearchOutcome:
    agent = get_agent(session, principal, agent_id)
    try:
        current: Standing | None = standing(session, agent=agent, now=now)
    except PolicyNotFound:
        current = None
    networks = current.policy.networks if current is not None else (agent.network,)
    total, rows = search_listed(
        session,
        query_terms(request.query),
        fresh_since=now - FRESH_FOR,
        category=request.category,
        network=request.network,
        limit=CANDIDATES,
    )
    chosen = [(item, relevance, _offer_for(item, networks, request.network)) for item, relevance in rows]
    payees = [offer.pay_to for _, _, offer in chosen if offer is not None and offer.pay_to]
    known = IntentRepository(session).known_payees(org_id=agent.org_id, payees=payees)
    reliability = reliability_of(session, [item.entry.host for item, _, _ in chosen], now=now)
    found: list[Found] = []
    for item, relevance, offer in chosen:
        if offer is None:
            continue  # no price at all: nothing fetch_paid could pay
        allowed, held, blockers, hold = _judge(agent, current, item, offer, known)
        found.append(
            Found(item, offer, relevance, reliability[item.entry.host], allowed, held, blockers, hold)
        )
    found.sort(key=lambda each: _rank(each, now))
    return SearchOutcome(agent.id, request.query, total, found[: request.limit])
