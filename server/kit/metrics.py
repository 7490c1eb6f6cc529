"""The process's Prometheus metrics, and the text `/metrics` answers with.

Every label is a closed set: tool names, outcome and error codes, states, reason codes, status
classes, JSON-RPC method names. None carries an organisation, an agent, a host, a URL or an
amount, so a metric can never tell one customer's traffic from another's.

Several processes of one host share their numbers through `PROMETHEUS_MULTIPROC_DIR` (read by
prometheus-client when it is imported, so it is set in the environment before the process starts;
`paywarden serve --workers N` makes one for its workers when none is set). Then a scrape of any
process answers for all of them, and each process removes its live gauges' files when it stops.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import Collector

MULTIPROC_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Seconds: a person's approval takes minutes, a seller or an RPC answers in milliseconds.
_APPROVAL_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
_NETWORK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

TOOL_CALLS = Counter(
    "paywarden_tool_calls",
    "MCP tool calls, by tool and outcome (ok, or the error code the call answered with).",
    ["tool", "outcome"],
)
DECISIONS = Counter(
    "paywarden_policy_decisions",
    "Policy decisions of paid calls, by outcome (allow, hold, deny) and first reason code.",
    ["outcome", "reason"],
)
APPROVAL_WAIT = Histogram(
    "paywarden_approval_wait_seconds",
    "How long a held call waited for a person's approval decision, by what it ended with.",
    ["outcome"],
    buckets=_APPROVAL_BUCKETS,
)
SELLER_LATENCY = Histogram(
    "paywarden_seller_request_seconds",
    "Time from sending a request to a seller to the head of its answer (or the failure).",
    ["status_class"],
    buckets=_NETWORK_BUCKETS,
)
SELLER_RESPONSES = Counter(
    "paywarden_seller_responses",
    "Requests to sellers by status class: 2xx, 3xx, 4xx, 5xx, timeout or unreachable.",
    ["status_class"],
)
RPC_LATENCY = Histogram(
    "paywarden_rpc_request_seconds",
    "JSON-RPC calls to the chain, by method and outcome (ok or error).",
    ["method", "outcome"],
    buckets=_NETWORK_BUCKETS,
)
DB_CONNECTIONS_IN_USE = Gauge(
    "paywarden_db_connections_in_use",
    "Database connections checked out of the pool, summed over live processes.",
    multiprocess_mode="livesum",
)

# JSON-RPC methods the chain adapter calls; any other name is counted as `other`.
RPC_METHODS = frozenset(
    {
        "eth_blockNumber",
        "eth_call",
        "eth_chainId",
        "eth_getBalance",
        "eth_getBlockByNumber",
        "eth_getLogs",
        "eth_getTransactionByHash",
        "eth_getTransactionReceipt",
    }
)


def rpc_method_label(method: str) -> str:
    return method if method in RPC_METHODS else "other"


def status_class(status: int) -> str:
    return f"{status // 100}xx" if 100 <= status <= 599 else "other"


@contextmanager
def timed(histogram: Histogram, **labels: str) -> Iterator[dict[str, str]]:
    """Observe the block's duration; the block may set labels in the dict it is given (its outcome)."""
    found = dict(labels)
    started = time.perf_counter()
    try:
        yield found
    finally:
        histogram.labels(**found).observe(time.perf_counter() - started)


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_DIR_ENV) or None


def process_stopping() -> None:
    """Remove this process's live gauges from the shared directory (counters stay: they add up)."""
    path = multiprocess_dir()
    if path is not None:
        mark_process_dead(os.getpid(), path)  # type: ignore[no-untyped-call]


@dataclass(frozen=True, eq=False)
class Snapshot(Collector):
    """Numbers read from the database at scrape time: the same whichever process answers."""

    payments_by_state: Mapping[str, int] = field(default_factory=dict)
    audit_head_age_s: float | None = None

    def collect(self) -> Iterable[Metric]:
        payments = GaugeMetricFamily(
            "paywarden_payments", "Payments in the database, by state.", labels=["state"]
        )
        for state, count in sorted(self.payments_by_state.items()):
            payments.add_metric([state], count)
        yield payments
        age = GaugeMetricFamily(
            "paywarden_audit_head_age_seconds",
            "Seconds since the newest audit event of any organisation (absent with no event).",
        )
        if self.audit_head_age_s is not None:
            age.add_metric([], self.audit_head_age_s)
        yield age


def exposition(snapshot: Snapshot) -> bytes:
    """The Prometheus text of every process sharing the directory (or of this one), and `snapshot`."""
    registry = CollectorRegistry()
    path = multiprocess_dir()
    if path is not None:
        MultiProcessCollector(registry, path=path)  # type: ignore[no-untyped-call]
        registry.register(snapshot)
        return generate_latest(registry)
    registry.register(snapshot)
    return generate_latest(REGISTRY) + generate_latest(registry)
