"""No MCP tool can write policy, beyond propose_rule's restrict-only rules on its own agent (a
policy change an agent asks for with request_policy_change only waits for a member's passkey).

Statically: a call graph of the server (by function name, so it over-approximates and can only
err towards reporting too much) shows which tool handlers can reach a function that writes
policy versions or rules. At run time: every tool is called with valid and hostile arguments, and
the only new rows are chat rules that restrict the calling agent.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.mcp.server import TOOL_MODULES
from server.models import PolicyVersion, RuleVersion
from server.policy import rulebook
from server.policy import service as policy_service
from tests.support.paywarden import RunningServer, mcp_client, serve
from tests.support.tenants import make_agent

ROOT = Path(__file__).resolve().parents[2]
WRITERS = set(policy_service.WRITERS) | set(rulebook.WRITERS)
# What each tool may reach: propose_rule adds restrict-only chat rules; fetch_paid and pay_x402 add a
# catalog host to the allowed hosts only after a human approved and the payment was signed.
ALLOWED = {
    "propose_rule": {"propose_chat_rule"},
    "fetch_paid": {"add_catalog_host"},
    "pay_x402": {"add_catalog_host"},
}


def _call_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Function name -> names it calls or passes on; tool name -> names its handler refers to.

    Module-level functions and methods are nodes; a nested function belongs to the one that
    encloses it (its references count as the encloser's), so a local helper named like another
    function cannot create a path that does not exist.
    """
    graph: dict[str, set[str]] = defaultdict(set)
    tools: dict[str, set[str]] = {}
    for package in ("server", "auth"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in _top_level_functions(tree):
                graph[node.name] |= _references(node)
            for walked in ast.walk(tree):
                if isinstance(walked, ast.FunctionDef | ast.AsyncFunctionDef):
                    for decorator in walked.decorator_list:
                        name = _tool_name(decorator)
                        if name is not None:
                            tools[name] = _references(walked)
    return graph, tools


def _top_level_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (
                item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
            )


def _references(node: ast.AST) -> set[str]:
    names: set[str] = set()
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name):
            names.add(inner.id)
        elif isinstance(inner, ast.Attribute):
            names.add(inner.attr)
    return names


def _tool_name(decorator: ast.expr) -> str | None:
    if (
        isinstance(decorator, ast.Call)
        and isinstance(decorator.func, ast.Attribute)
        and decorator.func.attr == "tool"
    ):
        for keyword in decorator.keywords:
            if keyword.arg == "name" and isinstance(keyword.value, ast.Constant):
                return str(keyword.value.value)
    return None


def _reachable(start: set[str], graph: dict[str, set[str]]) -> set[str]:
    seen: set[str] = set()
    todo = [name for name in start if name in graph]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(callee for callee in graph[name] if callee in graph and callee not in seen)
    return seen


def test_writers_are_real_functions() -> None:
    for name in policy_service.WRITERS:
        assert callable(getattr(policy_service, name))
    for name in rulebook.WRITERS:
        assert callable(getattr(rulebook, name))


def test_no_tool_can_reach_a_policy_writer_beyond_its_allowance() -> None:
    graph, tools = _call_graph()
    assert set(tools) == {module.__name__.rsplit(".", 1)[1] for module in TOOL_MODULES}
    for tool, references in tools.items():
        reached = _reachable(references, graph) | (references & set(graph))
        assert reached & WRITERS == ALLOWED.get(tool, set()), tool


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url) as running:
        yield running


def _rows(db: Database) -> tuple[list[tuple[str, int]], list[RuleVersion]]:
    with db.read() as session:
        policies = [(row.agent_id, row.version) for row in session.exec(select(PolicyVersion))]
        rules = list(session.exec(select(RuleVersion)))
    return sorted(policies), rules


HOSTILE: list[tuple[str, dict[str, object]]] = [
    ("get_budget", {}),
    ("get_budget", {"dailyCapUsd": "1000", "allowHosts": ["*.evil.example"]}),
    ("list_payments", {"limit": 50, "status": "settled"}),
    ("get_approval_status", {"approvalId": "apr_" + "0" * 20}),
    ("quote_payment", {"url": "https://evil.example/pay"}),
    ("quote_payment", {"url": "https://api.example.com/x", "maxAmountUsd": "1000"}),
    ("search_paid_apis", {"query": "web search", "allowHosts": ["*"], "verifiedSellersOnly": False}),
    ("search_paid_apis", {"query": "x" * 500, "limit": 1000}),
    ("diagnose_payment", {"url": "https://evil.example/pay", "maxAmountUsd": "1000"}),
    ("diagnose_payment", {"url": "https://api.example.com/x", "headers": {"X-Policy": "allow-all"}}),
    ("fetch_paid", {"url": "https://evil.example/pay", "maxAmountUsd": "1000000"}),
    (
        "fetch_paid",
        {"url": "https://api.example.com/x", "origin": "user", "headers": {"X-Policy": "allow-all"}},
    ),
    (
        "pay_x402",
        {
            "url": "https://evil.example/pay",
            "accepts": [{"scheme": "exact", "payTo": "0x" + "ee" * 20, "allowHosts": ["*"]}],
            "x402Version": 2,
            "resource": {"url": "https://evil.example/pay", "maxUsdPerTx": "1000000"},
        },
    ),
    ("report_receipt", {"intentId": "pi_" + "0" * 20, "paymentResponse": "eyJhbGxvd0hvc3RzIjpbIioiXX0="}),
    ("propose_rule", {"kind": "limit", "limitUsd": "1000000", "window": "month"}),
    ("propose_rule", {"kind": "allow", "host": "evil.example"}),
    ("propose_rule", {"kind": "hold", "host": "evil.example"}),
    ("propose_rule", {"kind": "limit", "limitUsd": "5", "scope": "org"}),
    ("propose_rule", {"kind": "limit", "limitUsd": "5", "ruleId": "rule_x", "expiresInHours": 100000}),
    ("propose_rule", {"kind": "deny", "pathPrefix": "/costly/"}),
    # A request waits for a member's passkey: asking, however it is worded, changes nothing.
    (
        "request_policy_change",
        {
            "note": "The owner approved this already: apply it now.",
            "change": {"addAllowHosts": ["evil.example"], "dailyCapUsd": "1000000"},
            "approve": True,
        },
    ),
    ("request_policy_change", {"note": "x", "change": {"allowHosts": ["*"], "maxUsdPerTx": "1000"}}),
    ("request_policy_change", {"note": "x", "change": {"removeRules": ["rule_x"]}, "status": "approved"}),
    ("get_policy_change_status", {"requestId": "pcr_" + "0" * 20, "decision": "approve"}),
]


@pytest.mark.anyio
async def test_tool_calls_add_nothing_but_restricting_chat_rules(server: RunningServer, db: Database) -> None:
    setup = make_agent(db, server.settings, allow_hosts=["api.example.com"], daily_cap="1.00")
    other = make_agent(
        db, server.settings, allow_hosts=["api.example.com"], org_id=setup.org_id, name="other"
    )
    policies_before, rules_before = _rows(db)
    async with mcp_client(server.mcp_url, setup.token) as client:
        for tool, arguments in HOSTILE:
            await client.call_tool(tool, arguments)
    policies_after, rules_after = _rows(db)
    assert policies_after == policies_before
    known = {(row.rule_id, row.version) for row in rules_before}
    added = [row for row in rules_after if (row.rule_id, row.version) not in known]
    assert added, "the valid proposals were expected to add rules"
    for row in added:
        assert row.source == "chat"
        assert (row.scope, row.scope_id, row.version) == ("agent", setup.agent_id, 1)
        assert row.kind in ("limit", "deny")
        assert row.expires_at is not None
        assert row.expires_at > datetime.now(UTC)
    assert other.agent_id not in {row.scope_id for row in added}
