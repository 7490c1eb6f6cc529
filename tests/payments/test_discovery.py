"""search_paid_apis as a service, on both databases, with a catalog of more than 200 generated
sellers: relevant results first, stale, suspended and candidate sellers absent, each result judged
by the agent's own policy (several policies), ranking by policy fit, reliability, freshness and
price among equally relevant sellers, and reliability shown only past its thresholds."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from sqlmodel import col, delete, select

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.catalog.service import suspend
from server.kit.db import Database
from server.kit.errors import InvalidInput
from server.models import PaymentIntent, PolicyVersion
from server.payments.discovery import SearchInput, SearchOutcome, search_paid_apis, validate_search
from server.policy.rulebook import add_rule
from server.policy.rules import RuleTarget
from server.policy.service import PolicyChanges
from server.settings import Settings
from server.vocabulary import IntentStatus, RuleKind, RuleScope, SuspensionReason, WalletMode
from tests.support.catalog import generate_catalog, generated_rows, list_seller
from tests.support.paywarden import settings_for
from tests.support.tenants import AgentSetup, change_policy, make_agent

NOW = datetime.now(UTC).replace(microsecond=0)
GENERATED = 220
PAYEE = "0x" + "11" * 20
OTHER = "0x" + "22" * 20


def principal(setup: AgentSetup) -> Principal:
    return Principal.for_agent(
        org_id=setup.org_id, agent_id=setup.agent_id, token_id="tok_t", scopes=AGENT_SCOPES
    )


def search(db: Database, setup: AgentSetup, query: str, **options: Any) -> SearchOutcome:
    request = SearchInput(query=query, limit=options.pop("limit", 10), **options)
    with db.read() as session:
        return search_paid_apis(session, principal(setup), agent_id=setup.agent_id, request=request, now=NOW)


def by_host(outcome: SearchOutcome) -> dict[str, Any]:
    return {found.item.entry.host: found for found in outcome.results}


@pytest.fixture
def settings(db: Database) -> Settings:
    return settings_for(database_url=db.url, port=8402)


@pytest.fixture
def catalog(db: Database) -> None:
    generate_catalog(db, GENERATED, now=NOW)


def weather(db: Database) -> None:
    fresh = NOW - timedelta(hours=1)
    seller = partial(list_seller, now=NOW, offers=[("eip155:84532", "0.01", PAYEE)], pinned=[PAYEE])
    seller(db, host="wx.example", name="Weather Forecast", category="weather",
                summary="Hourly forecasts for any city.", verified_at=fresh)  # fmt: skip
    seller(db, host="hub.example", name="Forecast Hub", category="climate",
                summary="Weather forecasts from many models.", verified_at=fresh)  # fmt: skip
    seller(db, host="climate.example", name="Climate Data", category="climate",
                summary="Historical weather observations.", verified_at=fresh)  # fmt: skip
    seller(db, host="stale.example", name="Weather Forecast Pro", category="weather",
                summary="Weather forecasts.", verified_at=NOW - timedelta(hours=25))  # fmt: skip
    seller(db, host="never.example", name="Weather Forecast Beta", category="weather",
                summary="Weather forecasts.", verified_at=None)  # fmt: skip
    seller(db, host="cand.example", name="Weather Forecast Candidate", category="weather",
                summary="Weather forecasts.", verified_at=fresh, accepted=False)  # fmt: skip
    stopped = seller(db, host="stopped.example", name="Weather Forecast Stopped", category="weather",
                          summary="Weather forecasts.", verified_at=fresh)  # fmt: skip
    with db.write() as session:
        suspend(session, stopped.entry_id, reason=SuspensionReason.PAYEE_CHANGED, now=NOW)


def test_relevant_results_come_first_and_stale_ones_never_show(
    db: Database, settings: Settings, catalog: None
) -> None:
    weather(db)
    agent = make_agent(db, settings, allow_hosts=[])
    found = search(db, agent, "weather forecast")
    assert [f.item.entry.host for f in found.results] == ["wx.example", "hub.example", "climate.example"]
    assert [f.relevance for f in found.results] == [10, 9, 4]
    assert found.total == 3  # stale, never verified, candidate and suspended sellers are not counted
    assert all(f.blockers == ("host_not_allowed",) for f in found.results)

    web = search(db, agent, "find me a web search API", limit=10)
    named = sum("Web Search" in entry.name for entry, _ in generated_rows(GENERATED, now=NOW))
    assert 0 < named < 10 < web.total
    assert [f.relevance for f in web.results] == sorted((f.relevance for f in web.results), reverse=True)
    assert all("Web Search" in f.item.entry.name for f in web.results[:named])
    assert all("Web Search" not in f.item.entry.name for f in web.results[named:])
    news = search(db, agent, "news search", category="search", limit=10)
    assert all(f.item.entry.category == "search" for f in news.results)
    assert "news" in news.results[0].item.entry.search_title.split()
    mainnet = search(db, agent, "crypto prices", network="eip155:8453", limit=10)
    assert mainnet.results
    assert all(f.offer.network == "eip155:8453" and not f.testnet for f in mainnet.results)
    assert search(db, agent, "weather", category="scraping").total == 0
    assert search(db, agent, "a the of").total == 0  # nothing to search for


@dataclass(frozen=True)
class Sellers:
    s1: str  # pinned payee, 0.01 on Base Sepolia
    s2: str  # Base only
    s3: str  # 0.50
    s4: str  # rotating
    s5: str  # re-pinned to OTHER, last verified asking PAYEE


def five_sellers(db: Database) -> Sellers:
    fresh = NOW - timedelta(minutes=5)
    common = partial(list_seller, now=NOW, verified_at=fresh, category="tides", summary="Tide tables.")
    common(db, host="s1.tide.example", name="Tide One", offers=[("eip155:84532", "0.01", PAYEE)],
                pinned=[PAYEE])  # fmt: skip
    common(db, host="s2.tide.example", name="Tide Two", offers=[("eip155:8453", "0.01", PAYEE)],
                pinned=[PAYEE])  # fmt: skip
    common(db, host="s3.tide.example", name="Tide Three", offers=[("eip155:84532", "0.50", PAYEE)],
                pinned=[PAYEE])  # fmt: skip
    common(
        db,
        host="s4.tide.example",
        name="Tide Four",
        offers=[("eip155:84532", "0.01", OTHER)],
    )
    common(db, host="s5.tide.example", name="Tide Five", offers=[("eip155:84532", "0.01", PAYEE)],
                pinned=[OTHER])  # fmt: skip
    return Sellers(*(f"s{n}.tide.example" for n in range(1, 6)))


def judged(db: Database, agent: AgentSetup) -> dict[str, tuple[bool, bool, tuple[str, ...]]]:
    outcome = search(db, agent, "tide tables", limit=10)
    return {host: (f.allowed, f.requires_approval, f.blockers) for host, f in by_host(outcome).items()}


def test_blockers_follow_the_agents_own_policy(db: Database, settings: Settings, catalog: None) -> None:
    s = five_sellers(db)

    nobody = make_agent(db, settings, allow_hosts=[], name="unset")
    with db.write() as session:
        session.execute(delete(PolicyVersion).where(col(PolicyVersion.agent_id) == nobody.agent_id))
    assert set(judged(db, nobody).values()) == {(False, False, ("no_policy",))}

    closed = make_agent(db, settings, allow_hosts=[], name="closed")
    seen = judged(db, closed)
    assert seen.pop(s.s2) == (False, False, ("host_not_allowed", "network_not_allowed"))
    assert set(seen.values()) == {(False, False, ("host_not_allowed",))}

    open_ = make_agent(db, settings, allow_hosts=["*.tide.example"], max_per_tx="0.10", name="open")
    assert judged(db, open_) == {
        s.s1: (True, False, ()),  # its payee is pinned for its host: not a new payee
        s.s2: (False, False, ("network_not_allowed",)),
        s.s3: (False, False, ("amount_exceeds_per_transaction",)),
        s.s4: (True, True, ()),  # rotating: a new payee waits for a person
        s.s5: (True, True, ()),
    }

    strict = make_agent(db, settings, allow_hosts=["*.tide.example"], max_per_tx="0.10", name="strict")
    change_policy(db, strict.agent_id, PolicyChanges(verified_sellers_only=True))
    assert judged(db, strict)[s.s5] == (False, False, ("pay_to_not_verified",))
    assert judged(db, strict)[s.s4] == (True, True, ())  # rotating sellers only need to be listed

    via_catalog = make_agent(db, settings, allow_hosts=[], name="catalog")
    change_policy(db, via_catalog.agent_id, PolicyChanges(allow_catalog_hosts=True))
    seen = judged(db, via_catalog)
    assert seen[s.s1] == (True, True, ())  # listed, so allowed; its first payment waits for a person
    assert seen[s.s2] == (False, False, ("network_not_allowed",))

    with db.write() as session:
        add_rule(
            session,
            target=RuleTarget(RuleScope.AGENT, open_.agent_id, open_.org_id),
            kind=RuleKind.DENY,
            host="s1.tide.example",
            path_prefix=None,
            limit_usd=None,
            window=None,
            actor="test",
            now=NOW,
        )
    assert judged(db, open_)[s.s1] == (False, False, ("rule_denied",))
    # Searching never changed a policy: the catalog never widens what an agent may pay.
    with db.read() as session:
        versions = session.exec(
            select(PolicyVersion.version).where(PolicyVersion.agent_id == open_.agent_id)
        ).all()
    assert list(versions) == [1, 2]


def _intents(
    db: Database, setup: AgentSetup, host: str, statuses: list[IntentStatus], sent: datetime
) -> None:
    with db.write() as session:
        for status in statuses:
            session.add(
                PaymentIntent(
                    id="pi_" + secrets.token_hex(8),
                    org_id=setup.org_id,
                    agent_id=setup.agent_id,
                    idempotency_key=secrets.token_hex(8),
                    fingerprint="f" * 64,
                    status=status,
                    method="GET",
                    host=host,
                    resource=f"https://{host}/v1",
                    x402_version=2,
                    network="eip155:84532",
                    asset="0x" + "33" * 20,
                    pay_to=PAYEE,
                    amount_atomic=10_000,
                    payer="0x" + "44" * 20,
                    nonce="0x" + secrets.token_hex(32),
                    valid_after=0,
                    valid_before=0,
                    policy_version=1,
                    decision={},
                    wallet_mode=WalletMode.LOCAL_KEY,
                    created_at=sent,
                    authorized_at=sent,
                    submitted_at=sent,
                    updated_at=sent,
                )
            )


def test_equally_relevant_sellers_rank_by_fit_reliability_freshness_then_price(
    db: Database, settings: Settings, catalog: None
) -> None:
    fresh, older = NOW - timedelta(minutes=5), NOW - timedelta(hours=7)
    rows = [  # host, verified at, price, allowed host?
        ("blocked.dunes.example", fresh, "0.001", False),
        ("flaky.dunes.example", fresh, "0.001", True),
        ("steady.dunes.example", fresh, "0.05", True),
        ("new.dunes.example", fresh, "0.02", True),
        ("cheap.dunes.example", fresh, "0.01", True),
        ("older.dunes.example", older, "0.001", True),
    ]
    for host, verified_at, price, _ in rows:
        offers = [("eip155:84532", price, PAYEE)]
        list_seller(db, host=host, name="Dune Maps", category="maps", summary="Maps of dunes.", now=NOW,
                    verified_at=verified_at, offers=offers, pinned=[PAYEE])  # fmt: skip
    allowed = [host for host, *_, ok in rows if ok]
    agent = make_agent(db, settings, allow_hosts=allowed)
    payers = [make_agent(db, settings, allow_hosts=[], name=f"payer{n}") for n in range(5)]
    for payer in payers:  # five organisations, four payments each: 20 in all
        _intents(db, payer, "steady.dunes.example", [IntentStatus.SETTLED] * 4, NOW - timedelta(days=2))
        _intents(db, payer, "flaky.dunes.example", [IntentStatus.SETTLED, IntentStatus.FAILED] * 2, NOW)

    found = search(db, agent, "dune maps", limit=10)
    assert [f.item.entry.host.split(".")[0] for f in found.results] == [
        "steady",  # measured 100 %
        "cheap",  # unmeasured (ranks as 90 %), fresh, cheaper than "new"
        "new",
        "older",  # unmeasured too, but verified 7 hours ago: after the fresh ones, however cheap
        "flaky",  # measured 50 %
        "blocked",  # not allowed by the policy, however cheap
    ]
    reliability = {f.item.entry.host.split(".")[0]: f.reliability for f in found.results}
    assert (reliability["steady"].sample, reliability["steady"].success_rate) == ("sufficient", Decimal("1"))
    assert (reliability["flaky"].sample, reliability["flaky"].success_rate) == ("sufficient", Decimal("0.5"))
    assert (reliability["cheap"].sample, reliability["cheap"].success_rate) == ("insufficient", None)


def test_reliability_needs_five_organisations_and_twenty_payments_in_thirty_days(
    db: Database, settings: Settings
) -> None:
    list_seller(db, host="r.example", name="Reliable", category="maps", summary="Maps.", now=NOW,
                verified_at=NOW, offers=[("eip155:84532", "0.01", PAYEE)], pinned=[PAYEE])  # fmt: skip
    agent = make_agent(db, settings, allow_hosts=[])
    payers = [make_agent(db, settings, allow_hosts=[], name=f"p{n}") for n in range(5)]

    def sample() -> tuple[str, Decimal | None]:
        (only,) = search(db, agent, "reliable").results
        return only.reliability.sample, only.reliability.success_rate

    for payer in payers[:4]:  # four organisations, five payments each
        _intents(db, payer, "r.example", [IntentStatus.SETTLED] * 5, NOW - timedelta(days=1))
    assert sample() == ("insufficient", None)
    _intents(db, payers[4], "r.example", [IntentStatus.SUBMITTED] * 3, NOW)  # in flight: no outcome yet
    _intents(db, payers[4], "r.example", [IntentStatus.FAILED] * 3, NOW - timedelta(days=31))  # too old
    assert sample() == ("insufficient", None)
    _intents(db, payers[4], "r.example", [IntentStatus.EXPIRED], NOW)
    assert sample() == ("sufficient", Decimal("0.9524"))  # 20 served of 21


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({}, "invalid_query"),
        ({"query": ""}, "invalid_query"),
        ({"query": "x" * 201}, "invalid_query"),
        ({"query": 5}, "invalid_query"),
        ({"query": "maps", "category": "Maps!"}, "invalid_category"),
        ({"query": "maps", "network": "eip155:1"}, "invalid_network"),
        ({"query": "maps", "limit": 11}, "invalid_limit"),
        ({"query": "maps", "limit": 0}, "invalid_limit"),
        ({"query": "maps", "limit": True}, "invalid_limit"),
    ],
)
def test_search_input_is_validated(arguments: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        validate_search(arguments)
    assert refused.value.reason == reason
    assert validate_search({"query": "  maps "}) == SearchInput("maps", None, None, 5)
