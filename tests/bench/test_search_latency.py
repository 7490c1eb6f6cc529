"""How long search_paid_apis takes with 10,000 sellers in the catalog, on SQLite and PostgreSQL.

Measured: the whole search as the tool runs it, in one read transaction: full-text matching and
relevance in the database, then the agent's policy judging each of the (at most 200) candidates,
reliability from the ledger, and the ranking. Run with `make bench`; PAYWARDEN_BENCH_QUICK=1 uses
1,000 sellers and fewer rounds, to check the benchmark itself quickly.
"""

from __future__ import annotations

import os
import statistics
import time
from datetime import UTC, datetime

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.kit.db import Database
from server.payments.discovery import SearchInput, search_paid_apis
from tests.support.catalog import generate_catalog
from tests.support.paywarden import settings_for
from tests.support.tenants import make_agent

QUICK = os.environ.get("PAYWARDEN_BENCH_QUICK") == "1"
SELLERS = 1_000 if QUICK else 10_000
ROUNDS = 3 if QUICK else 15
QUERIES = (
    "find me a web search API",
    "crypto prices",
    "scrape a page to text",
    "token balances of a wallet",
    "translation",
    "nothing in the catalog matches this",
)
# Not a target, a tripwire: a search this slow has lost its index or gone quadratic.
CEILING_P95_S = 2.0


def test_search_latency_with_a_large_catalog(db: Database) -> None:
    now = datetime.now(UTC)
    started = time.perf_counter()
    generate_catalog(db, SELLERS, now=now)
    filled_s = time.perf_counter() - started
    setup = make_agent(
        db,
        settings_for(database_url=db.url, port=8402),
        allow_hosts=["*.search.gen.example"],
        max_per_tx="0.02",
    )
    reader = Principal.for_agent(
        org_id=setup.org_id, agent_id=setup.agent_id, token_id="tok_bench", scopes=AGENT_SCOPES
    )

    def once(query: str) -> float:
        begin = time.perf_counter()
        with db.read() as session:
            outcome = search_paid_apis(
                session, reader, agent_id=setup.agent_id, request=SearchInput(query, limit=10), now=now
            )
        elapsed = time.perf_counter() - begin
        assert (outcome.total > 0) is (query != QUERIES[-1])
        return elapsed

    for query in QUERIES:  # warm caches and plans
        once(query)
    timings = [once(query) for _ in range(ROUNDS) for query in QUERIES]
    timings.sort()
    median_ms = statistics.median(timings) * 1000
    p95 = timings[int(len(timings) * 0.95) - 1]
    kind = "sqlite" if db.is_sqlite else "postgres"
    print(
        f"\nsearch_paid_apis on {kind}, {SELLERS} sellers (filled in {filled_s:.1f} s): median "
        f"{median_ms:.1f} ms, p95 {p95 * 1000:.1f} ms, max {timings[-1] * 1000:.1f} ms "
        f"over {len(timings)} searches"
    )
    assert p95 < CEILING_P95_S
