"""What an operator sees of a real paid call and a real sign-in: log lines, /metrics, request ids.

The logs are captured as the process's own configuration writes them (`configure_logging` at
DEBUG, JSON lines), and searched, with the /metrics text, for every secret and every piece of an
organisation's data the calls carried: the bearer token, the master key, the payment signature,
the seller's body and URL, the organisation's id, and the OAuth code, tokens and enrolment link.
"""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families
from sqlmodel import select

from server.audit.service import first_broken_link
from server.kit.db import Database
from server.kit.logs import configure_logging
from server.models import AuditEvent
from server.vocabulary import Role
from tests.support.chain import Anvil, TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.oauth import (
    SoftBrowser,
    authorization_params,
    code_of,
    enrollment_link_token,
    exchange,
    pkce,
    refresh_with,
    register,
)
from tests.support.paywarden import (
    TEST_MASTER_KEY,
    RunningServer,
    chain_environ,
    error_of,
    mcp_client,
    serve,
    structured,
)
from tests.support.seller import Seller
from tests.support.tenants import make_agent, make_member, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def server(module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    environ = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(module_sqlite_db.url, extra=environ) as running:
        yield running


@pytest.fixture
def log_text() -> Iterator[io.StringIO]:
    """Every line the process's log configuration writes at DEBUG while the test runs."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {
        name: logger.level
        for name, logger in logging.root.manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    # `paywarden serve` leaves uvicorn's loggers to the root's handler (log_config=None); the test
    # server was started with uvicorn's own configuration, so it is undone for the test.
    uvicorn_loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.access", "uvicorn.error")]
    uvicorn_saved = [(logger.handlers[:], logger.propagate) for logger in uvicorn_loggers]
    configure_logging("json", level=logging.DEBUG)
    for logger in uvicorn_loggers:
        logger.handlers[:], logger.propagate = [], True
        logger.setLevel(logging.NOTSET)
    buffer = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(buffer)
    handler.addFilter(_not_the_test_client)
    try:
        yield buffer
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, saved in levels.items():
            logging.getLogger(name).setLevel(saved)
        for logger, (saved_handlers, propagate) in zip(uvicorn_loggers, uvicorn_saved, strict=True):
            logger.handlers[:], logger.propagate = saved_handlers, propagate


def _not_the_test_client(record: logging.LogRecord) -> bool:
    # The test's own MCP client runs in this process too; Paywarden never loads mcp.client.
    return not record.name.startswith("mcp.client")


def scrape(server: RunningServer) -> str:
    answer = httpx.get(f"{server.base_url}/metrics", timeout=15)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return answer.text


def samples(text: str) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: Samples, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def signature_parts(header: str) -> list[str]:
    """The PAYMENT-SIGNATURE header and the EIP-3009 signature inside it."""
    document: dict[str, Any] = json.loads(base64.b64decode(header))
    signature = document["payload"]["signature"]
    assert isinstance(signature, str)
    assert len(signature) > 100
    return [header, signature, signature.removeprefix("0x")]


async def test_a_paid_call_leaves_no_secret_in_logs_or_metrics_and_is_counted(
    server: RunningServer,
    module_sqlite_db: Database,
    seller: Seller,
    funded_wallet: FundedWallet,
    log_text: io.StringIO,
) -> None:
    db = module_sqlite_db
    setup = make_agent(db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key)
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    before = samples(scrape(server))

    headers = {"Authorization": f"Bearer {setup.token}", "X-Request-Id": "call-7f3a"}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with http, Client(streamable_http_client(server.mcp_url, http_client=http)) as client:
        result = await client.call_tool("fetch_paid", {"url": seller.url("/premium")})
    paid = structured(result)
    assert paid["status"] == "paid"
    assert paid["receipt"]["state"] == "settled"
    header = seller.counter.last("/premium")
    assert header is not None

    metrics_text = scrape(server)
    after = samples(metrics_text)
    logged = log_text.getvalue()

    # The log lines are there, and carry the request's id.
    lines = [json.loads(line) for line in logged.splitlines() if line.strip()]
    assert lines, "nothing was logged at DEBUG"
    assert any(line.get("requestId") == "call-7f3a" and "POST /mcp" in line["message"] for line in lines), (
        "the server's lines for the call were not captured"
    )
    assert all("requestId" in line for line in lines)

    # Nothing secret, nothing of the organisation's: not in a log line, not in a metric.
    secrets_and_data = [
        setup.token,
        TEST_MASTER_KEY,
        TEST_MASTER_KEY.split("_", 1)[-1],
        *signature_parts(header),
        funded_wallet.private_key,
        funded_wallet.private_key.removeprefix("0x"),
        '"path": "/premium"',  # the seller's body, as the tool answered it
        '"path":"/premium"',
        setup.org_id,
        setup.agent_id,
        seller.url("/premium"),
        seller.base_url.removeprefix("http://"),  # the seller's host and port
    ]
    for found in secrets_and_data:
        assert found not in logged, f"a log line carries {found[:12]}..."
        assert found not in metrics_text, f"a metric carries {found[:12]}..."

    # Counted: the call, its decision, the seller's 402 and 200, the chain's answers, the payment.
    assert value(after, "paywarden_tool_calls_total", tool="fetch_paid", outcome="ok") == (
        value(before, "paywarden_tool_calls_total", tool="fetch_paid", outcome="ok") + 1
    )
    assert value(after, "paywarden_policy_decisions_total", outcome="allow", reason="none") == (
        value(before, "paywarden_policy_decisions_total", outcome="allow", reason="none") + 1
    )
    for status_class in ("4xx", "2xx"):
        assert value(after, "paywarden_seller_responses_total", status_class=status_class) >= (
            value(before, "paywarden_seller_responses_total", status_class=status_class) + 1
        )
        assert value(after, "paywarden_seller_request_seconds_count", status_class=status_class) > 0
    rpc_calls = sum(
        count
        for (name, labels), count in after.items()
        if name == "paywarden_rpc_request_seconds_count" and ("outcome", "ok") in labels
    )
    assert rpc_calls > 0
    assert value(after, "paywarden_payments", state="settled") >= 1
    assert ("paywarden_audit_head_age_seconds", ()) in after, "no audit head age"
    assert 0 <= value(after, "paywarden_audit_head_age_seconds") < 60
    assert ("paywarden_db_connections_in_use", ()) in after

    # The audit events the call wrote name its request, and the hash chain still checks out.
    with db.read() as session:
        events = list(session.exec(select(AuditEvent).where(AuditEvent.org_id == setup.org_id)))
        written = [event for event in events if event.type.startswith("payment.")]
        assert written, [event.type for event in events]
        assert {event.data.get("requestId") for event in written} == {"call-7f3a"}
        # Events written outside any request (the test's own setup) carry none.
        assert any("requestId" not in event.data for event in events)
        assert first_broken_link(session, setup.org_id) is None


def test_a_sign_in_and_a_connection_leave_no_secret_in_logs_or_metrics(
    server: RunningServer, module_sqlite_db: Database, log_text: io.StringIO
) -> None:
    db = module_sqlite_db
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"])
    member_id = make_member(db, agent.org_id, role=Role.OWNER)
    enroll = enrollment_link_token(db, member_id, agent.org_id, clock=server.clock)
    with SoftBrowser(server) as browser:
        browser.enroll(enroll)
        browser.http.cookies.clear()
        signed_in = browser.sign_in()
        assert signed_in.status_code == 200, signed_in.text
        client = register(server, client_name="Observed client")
        challenge = pkce()
        page = browser.authorize(authorization_params(client["client_id"], challenge))
        assert page.status_code == 200, page.text[:300]
        code = code_of(browser.consent(page))
        tokens = exchange(server, client["client_id"], code, challenge.verifier).json()
        refreshed = refresh_with(server, client["client_id"], tokens["refresh_token"]).json()
        cookies = [cookie.value for cookie in browser.http.cookies.jar if cookie.value]
    assert "access_token" in refreshed, refreshed
    assert cookies, "the sign-in set no cookie"
    metrics_text = scrape(server)
    logged = log_text.getvalue()
    assert logged.strip(), "nothing was logged at DEBUG"

    secrets_and_data = [
        enroll,
        code,
        challenge.verifier,
        tokens["access_token"],
        tokens["refresh_token"],
        refreshed["access_token"],
        refreshed["refresh_token"],
        agent.token,
        TEST_MASTER_KEY,
        agent.org_id,
        member_id,
        *cookies,
    ]
    for found in secrets_and_data:
        assert found not in logged, f"a log line carries {found[:12]}..."
        assert found not in metrics_text, f"a metric carries {found[:12]}..."


async def test_a_denied_call_is_counted_by_its_outcome_and_first_reason(
    server: RunningServer, module_sqlite_db: Database, seller: Seller, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        module_sqlite_db,
        server.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        max_per_tx="0.10",
    )
    labels = {"outcome": "deny", "reason": "amount_exceeds_per_transaction"}
    before = samples(scrape(server))
    async with mcp_client(server.mcp_url, setup.token) as client:
        denied = await client.call_tool("fetch_paid", {"url": seller.url("/report")})  # 0.50 > 0.10
    assert error_of(denied)["code"] == "policy_denied"
    after = samples(scrape(server))
    assert value(after, "paywarden_policy_decisions_total", **labels) == (
        value(before, "paywarden_policy_decisions_total", **labels) + 1
    )
    calls = {"tool": "fetch_paid", "outcome": "policy_denied"}
    assert value(after, "paywarden_tool_calls_total", **calls) == (
        value(before, "paywarden_tool_calls_total", **calls) + 1
    )
