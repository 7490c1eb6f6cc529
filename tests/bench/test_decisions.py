"""Policy decisions per second: the pure engine alone, and decision plus reservation through the database.

The engine: `evaluate` on one payment that passes everything (so every rule is looked at, and then
every hold), with 0, 10 and 100 rules.

Through the database: the ledger's `reserve` (organisation lock, every counted sum, the decision,
the intent and its audit event, in one transaction), on SQLite and PostgreSQL, for 1, 100 and 10,000
agents spread over up to 16 organisations (`PAYWARDEN_BENCH_ORGS`), each organisation with 0, 10 or
100 rules of its own on top of every agent's default weekly limit; from one process, and on
PostgreSQL from four processes at once. Every reservation is authorised (the amounts are tiny), so
each one writes an intent. Each cell starts a month after the one before, so every window it
counts starts empty and no cell pays for the rows of another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import IO

import pytest

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.policy.engine import Context, Payment, Usage, compile_rules, evaluate
from server.policy.model import Policy, host_patterns
from server.policy.rules import Rule
from server.policy.service import PolicyChanges, set_policy
from server.tenancy.service import create_agent, create_org, get_agent
from server.vocabulary import RuleScope
from tests.bench.data import add_org_rule
from tests.bench.harness import ROOT, BenchSettings, BenchTable, Row, quick, rate, setting
from tests.bench.profiling import profiled
from tests.support.databases import migrated_database
from tests.support.ledger import PAYEE, facts, reserve_now
from tests.support.principals import OPERATOR
from tests.support.tenants import pin_payee

pytestmark = pytest.mark.timeout(3600)

HOST = "api.example.com"
ACTOR = "bench:setup"
FIRST_CELL = datetime(2031, 1, 1, 9, 0, tzinfo=UTC)
READY_TIMEOUT_S = 120


def org_count() -> int:
    return setting("ORGS", 16, 16)


# -- the rules: mostly limits that count (so each adds a sum), some deny and hold rules that
# -- do not select this payment (so each is still looked at)


def rule_terms(index: int) -> dict[str, object]:
    kind = ("limit", "limit", "limit", "deny", "hold")[index % 5]
    window = ("day", "week", "month")[index % 3]
    if kind == "deny":
        return {"kind": "deny", "host": f"blocked-{index}.example", "path_prefix": None, "window": None}
    if kind == "hold":
        return {"kind": "hold", "host": None, "path_prefix": f"/held-{index}", "window": None}
    conditions = (
        {"host": None, "path_prefix": None},
        {"host": HOST, "path_prefix": None},
        {"host": "*.example.com", "path_prefix": None},
        {"host": None, "path_prefix": "/v1"},
    )[index % 4]
    return {"kind": "limit", "window": window, **conditions}


def engine_rules(count: int) -> list[Rule]:
    rules = []
    for index in range(count):
        terms = rule_terms(index)
        limit = 1_000_000_000 if terms["kind"] == "limit" else None
        rules.append(
            Rule(
                id=f"rule_{index:04d}",
                version=1,
                scope=(RuleScope.AGENT, RuleScope.ORG, RuleScope.TEAM)[index % 3],
                kind=terms["kind"],  # type: ignore[arg-type]
                host=terms["host"],  # type: ignore[arg-type]
                path_prefix=terms["path_prefix"],  # type: ignore[arg-type]
                limit_atomic=limit,
                window=terms["window"],  # type: ignore[arg-type]
            )
        )
    return rules


def test_engine_decisions_per_second(bench: BenchSettings, table: BenchTable) -> None:
    policy = Policy(
        version=2,
        networks=("eip155:84532",),
        allow_hosts=(HOST, "*.data.example"),
        max_usd_per_tx=Decimal("1.00"),
        daily_cap_usd=Decimal("100.00"),
    )
    payment = Payment(HOST, "/v1/search", "eip155:84532", "USDC", PAYEE, 10_000, HOST)
    context = Context(pay_to_known=True)
    for count in bench.rule_counts:
        rules = compile_rules(engine_rules(count))  # once per rule versions, as the ledger's Standing does
        usage = Usage(
            spent_today_atomic=50_000,
            window_tx_count=2,
            window_spent_atomic=20_000,
            rule_spent_atomic={rule.id: 30_000 for rule in rules if rule.kind == "limit"},
        )
        assert evaluate(policy, rules, usage, payment, context).outcome == "allow"
        decisions = 0
        began = time.perf_counter()
        deadline = began + bench.engine_seconds
        while time.perf_counter() < deadline:
            for _ in range(100):
                evaluate(policy, rules, usage, payment, context)
            decisions += 100
        per_second = decisions / (time.perf_counter() - began)
        met = per_second >= 50_000 if count == 100 else None
        table.add(
            Row(
                "policy engine alone",
                "-",
                f"{count} rules",
                "decisions/s",
                rate(per_second),
                "≥ 50,000 at 100 rules" if count == 100 else "",
                met,
                {"per_second": per_second},
            )
        )


# -- decision and reservation through the database


def setup_agents(db: Database, agents: int, orgs: int) -> list[str]:
    """`agents` agents spread round-robin over `orgs` organisations, each allowed to pay HOST."""
    now = SystemClock().now()
    changes = PolicyChanges(allow_hosts=host_patterns("allow", [HOST]))
    with db.write() as session:
        org_rows = [create_org(session, name=f"bench-org-{i}", actor=ACTOR, now=now) for i in range(orgs)]
    ids: list[str] = []
    batch = 500
    for first in range(0, agents, batch):
        with db.write() as session:
            for index in range(first, min(agents, first + batch)):
                org = org_rows[index % orgs]
                agent = create_agent(
                    session, org=org, name=f"agent-{index}", network="eip155:84532", actor=ACTOR, now=now
                )
                set_policy(session, agent=agent, changes=changes, actor=ACTOR, now=now)
                ids.append(agent.id)
    pin_payee(db, url=f"https://{HOST}/v1/search", pay_to=PAYEE)
    return ids


def add_org_rules(db: Database, org_ids: list[str], first: int, last: int) -> None:
    """Rules first..last-1 of the mix, for every organisation."""
    now = SystemClock().now()
    for org_id in org_ids:
        with db.write() as session:
            for index in range(first, last):
                terms = rule_terms(index)
                add_org_rule(
                    session,
                    org_id=org_id,
                    kind=str(terms["kind"]),
                    host=terms["host"],  # type: ignore[arg-type]
                    path_prefix=terms["path_prefix"],  # type: ignore[arg-type]
                    limit_usd=Decimal("1000") if terms["kind"] == "limit" else None,
                    window=terms["window"],  # type: ignore[arg-type]
                    now=now,
                )


class Worker:
    def __init__(self, database_url: str, log: IO[bytes]) -> None:
        environ = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.reserve_worker", database_url],
            cwd=ROOT,
            env=environ,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def answer(self) -> dict[str, object]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"reserve worker exited with {self.process.wait(timeout=10)}")
        answer: dict[str, object] = json.loads(line)
        return answer

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


@contextmanager
def workers(database_url: str, count: int, log_dir: Path) -> Iterator[list[Worker]]:
    with ExitStack() as stack:
        started = []
        for index in range(count):
            log = stack.enter_context((log_dir / f"worker-{index}.log").open("wb"))
            worker = Worker(database_url, log)
            stack.callback(worker.stop)
            started.append(worker)
        yield started


def measure(
    pool: list[Worker], agents: list[str], seconds: float, start: datetime
) -> tuple[float, dict[str, int]]:
    """Reservations per second of `pool` working together, and their kinds."""
    command = json.dumps({"agents": agents, "seconds": seconds, "start": start.isoformat()})
    for worker in pool:
        worker.send(command)
    for worker in pool:
        assert worker.answer().get("ready") is True
    for worker in pool:
        worker.send("go")
    answers = [worker.answer() for worker in pool]
    kinds: dict[str, int] = {}
    for answer in answers:
        for kind, count in dict(answer["kinds"]).items():  # type: ignore[call-overload]
            kinds[kind] = kinds.get(kind, 0) + int(count)
    slowest = max(float(answer["elapsed"]) for answer in answers)  # type: ignore[arg-type]
    return sum(kinds.values()) / slowest, kinds


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_decisions_with_reservation_per_second(
    kind: str, tmp_path: Path, bench: BenchSettings, table: BenchTable
) -> None:
    label = "SQLite" if kind == "sqlite" else "PostgreSQL"
    process_counts = [1] if kind == "sqlite" else [1, 4]
    agent_counts = sorted(bench.agent_counts)
    with migrated_database(kind, tmp_path) as db:
        began = time.monotonic()
        all_agents = setup_agents(db, max(agent_counts), min(org_count(), max(agent_counts)))
        with db.read() as session:
            org_ids = sorted({get_agent(session, OPERATOR, agent_id).org_id for agent_id in all_agents})
        took = time.monotonic() - began
        print(f"\n  {label}: {len(all_agents)} agents in {len(org_ids)} organisations in {took:.1f} s")
        # A sanity check before measuring: a reservation is authorised.
        assert (
            reserve_now(db, all_agents[0], facts("bench-check-0001", amount=1), FIRST_CELL).kind
            == "authorized"
        )

        cell = 0
        rules_so_far = 0
        with workers(db.url, max(process_counts), tmp_path) as pool:
            for rules in sorted(bench.rule_counts):
                if rules > rules_so_far:
                    add_org_rules(db, org_ids, rules_so_far, rules)
                    rules_so_far = rules
                for agents in agent_counts:
                    chosen = all_agents[:agents]
                    orgs = min(agents, len(org_ids))
                    for processes in process_counts:
                        cell += 1
                        start = FIRST_CELL + timedelta(days=32 * cell)
                        # One profile per database, of one worker, in the busiest cell with 10 rules.
                        profile = bool(bench.profile) and rules == 10 and agents == agent_counts[-1]
                        profile = profile and processes == process_counts[-1]
                        with profiled(
                            pool[0].process.pid, f"reserve-{label}", mode=bench.profile if profile else ""
                        ):
                            per_second, kinds = measure(
                                pool[:processes], chosen, bench.reserve_seconds, start
                            )
                        assert set(kinds) == {"authorized"}, kinds
                        target = ""
                        met = None
                        if kind == "postgres" and processes == 4:
                            target, met = "≥ 2,000 with 4 processes", per_second >= 2_000
                        table.add(
                            Row(
                                "decision + reservation",
                                label,
                                f"{agents:,} agent{'s' if agents > 1 else ''} in {orgs} "
                                f"org{'s' if orgs > 1 else ''}, {rules} rules, "
                                f"{processes} process{'es' if processes > 1 else ''}",
                                "reservations/s",
                                rate(per_second),
                                target,
                                met,
                                {"per_second": per_second},
                            )
                        )
    if quick():
        print(
            "  (quick mode: each cell ran for PAYWARDEN_BENCH_RESERVE_SECONDS =", bench.reserve_seconds, "s)"
        )
