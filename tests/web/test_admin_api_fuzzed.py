"""schemathesis against /api/v1/openapi.json on a real server, with an `admin:write` token: for
inputs generated from the document itself, no answer is a server error, and every answer has a
status, a content type and a body the document says that operation can answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from auth.scopes import Scope
from auth.tokens import find_by_secret
from server.catalog.service import add_entry
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.policy.rulebook import rules_of_org
from tests.support.admin_api import admin_token
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member

EXAMPLES_PER_OPERATION = 20
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@dataclass(frozen=True)
class AdminApi:
    server: RunningServer
    token: str
    ids: dict[str, str]  # path parameters that name something that exists


@pytest.fixture
def admin_api(sqlite_db: Database) -> Iterator[AdminApi]:
    """A server with one organisation that has an agent, a member, a rule and a payment, a seller
    in the catalog, and an admin:write token."""
    # Every operation's examples in one minute: more than the default rate limit lets through.
    with serve(sqlite_db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "100000"}) as server:
        setup = make_agent(sqlite_db, server.settings, allow_hosts=["api.example.com"])
        member = make_member(sqlite_db, setup.org_id, role="approver")
        with sqlite_db.read() as session:
            agent_token = find_by_secret(session, setup.token)
        assert agent_token is not None
        token = admin_token(sqlite_db, server, setup.org_id, frozenset({Scope.ADMIN_WRITE}))
        now = SystemClock().now()
        paid = reserve_now(sqlite_db, setup.agent_id, facts("fuzzed", host="api.example.com"), now).intent
        assert paid is not None
        with sqlite_db.write() as session:
            (rule,) = rules_of_org(session, setup.org_id, now=now)
            entry = add_entry(
                session,
                name="Fuzzed seller",
                host="fuzzed.example.com",
                url="https://fuzzed.example.com/x",
                price_usd=Decimal("0.01"),
                network="eip155:84532",
                category="data",
                pay_to=["0x" + "ef" * 20],
                actor="test",
                now=now,
            )
        ids = {
            "agent_id": setup.agent_id,
            "member_id": member,
            "token_id": agent_token.id,
            "rule_id": rule[0].id,
            "payment_id": paid.id,
            "entry_id": entry.id,
        }
        yield AdminApi(server, token, ids)


def test_every_operation_answers_what_its_document_says(admin_api: AdminApi) -> None:
    base = admin_api.server.settings.admin_api_audience
    document = schemathesis.openapi.from_url(f"{base}/openapi.json", timeout=30)
    operations = [result.ok() for result in document.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 20  # every route of the table, not a document that failed to load
    answered: Counter[tuple[str, int]] = Counter()
    for operation in operations:

        @given(case=operation.as_strategy(), existing=st.booleans())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def answers_as_documented(case: schemathesis.Case[Any], existing: bool) -> None:
            label = case.operation.label
            if existing:  # half the cases name what exists, so they reach past the lookup
                for name in case.path_parameters or {}:
                    if name in admin_api.ids:
                        case.path_parameters[name] = admin_api.ids[name]
            response = case.call_and_validate(
                base_url=base,
                headers={"Authorization": f"Bearer {admin_api.token}"},
                checks=CHECKS,
                timeout=30,
            )
            answered[(label, response.status_code // 100)] += 1

        answers_as_documented()
    # The inputs reached the handlers: every operation answered, and every read of something that
    # exists succeeded at least once.
    assert {label for label, _ in answered} == {operation.label for operation in operations}
    reachable = {
        operation.label
        for operation in operations
        if operation.method.upper() == "GET"
        and all(name in admin_api.ids for name in _path_names(operation.path))
    }
    succeeded = {label for label, status in answered if status == 2}
    assert sorted(reachable - succeeded) == [], sorted(answered.items())


def _path_names(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]
