"""The admin API's two scopes against a real server: admin:read reads, admin:write also changes,
the older `admin` means admin:write, and an agent's token opens no route under /api/v1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from auth.scopes import AGENT_SCOPES, Scope, ScopeError, admin_allows, parse_scopes
from auth.tokens import TokenNotFound
from server.catalog.errors import EntryNotFound
from server.kit.db import Database
from server.payments.errors import PaymentNotFound
from server.policy.rulebook import RuleNotFound, RuleRejected, ScopeNotFound
from server.policy.rules import RuleReason
from server.policy.service import InvalidPolicy, PolicyNotFound, SudoRequired
from server.tenancy.service import AgentNotFound, LastOwner
from server.web.api.parts import status_of
from server.web.api.routes import OPERATIONS
from tests.support.admin_api import admin_token, call, problem
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


def test_write_implies_read_and_admin_means_write() -> None:
    assert admin_allows({Scope.ADMIN_READ}, write=False)
    assert not admin_allows({Scope.ADMIN_READ}, write=True)
    assert admin_allows({Scope.ADMIN_WRITE}, write=False)
    assert admin_allows({Scope.ADMIN_WRITE}, write=True)
    assert admin_allows({Scope.ADMIN}, write=True)
    assert not admin_allows({Scope.PAYMENTS_READ, Scope.PAYMENTS_WRITE}, write=False)
    for name in ("admin", "admin:read", "admin:write"):
        with pytest.raises(ScopeError):
            parse_scopes(f"payments:read {name}", for_agent=True)


def test_a_read_token_reads_but_is_refused_a_change(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="scoped")
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    writer = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_WRITE}))
    legacy = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN}))
    disable = f"/agents/{agent.agent_id}/disable"

    assert call(server, "get", "/agents", reader).status_code == 200
    refused = problem(call(server, "post", disable, reader), 403, "insufficient_scope")
    assert "admin:write" in refused["detail"]
    assert 'scope="admin:write"' in call(server, "post", disable, reader).headers["www-authenticate"]
    assert call(server, "get", f"/agents/{agent.agent_id}", reader).json()["disabled"] is False

    disabled = call(server, "post", disable, writer)
    assert disabled.status_code == 200, disabled.text
    assert disabled.json()["disabled"] is True
    assert call(server, "get", "/agents", writer).json()["agents"][0]["disabled"] is True
    enabled = call(server, "post", f"/agents/{agent.agent_id}/enable", legacy)
    assert enabled.status_code == 200, enabled.text
    assert enabled.json()["disabled"] is False


def test_every_route_reads_with_admin_read_and_changes_only_with_admin_write(
    server: RunningServer, db: Database
) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="tabled")
    reader = admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ}))
    state = ("/agents", f"/agents/{agent.agent_id}/policy", "/rules", "/organization")
    before = [call(server, "get", path, reader).json() for path in state]
    for operation in OPERATIONS:
        path = operation.path.replace("{agent_id}", agent.agent_id)
        for parameter in operation.parameters:
            path = path.replace("{" + parameter.name + "}", "x_missing")
        answer = call(server, operation.method, path, reader, body={})
        where = f"{operation.method.upper()} {operation.path}"
        if operation.writes:
            refused = problem(answer, 403, "insufficient_scope")
            assert "admin:write" in refused["detail"], where
        else:
            assert answer.status_code not in {401, 403}, f"{where}: {answer.text}"
    after = [call(server, "get", path, reader).json() for path in state]
    assert after == before  # nothing a read token sent changed anything


def test_an_agent_token_is_refused_on_every_route(server: RunningServer, db: Database) -> None:
    agent = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="agentic")
    # Even an agent token made for this API's audience, with every scope an agent may hold.
    aimed = admin_token(db, server, agent.org_id, AGENT_SCOPES, agent_id=agent.agent_id)
    for operation in OPERATIONS:
        path = operation.path.replace("{agent_id}", agent.agent_id)
        for segment in (
            "{member_id}",
            "{token_id}",
            "{connection_id}",
            "{approval_id}",
            "{change_id}",
            "{rule_id}",
            "{payment_id}",
            "{entry_id}",
            "{host}",
        ):
            path = path.replace(segment, "x_missing")
        assert "{" not in path, f"teach this test the path parameter of {operation.path}"
        problem(call(server, operation.method, path, agent.token, body={}), 401, "invalid_token")
        problem(call(server, operation.method, path, aimed, body={}), 403, "insufficient_scope")
    assert (
        call(
            server,
            "get",
            f"/agents/{agent.agent_id}",
            admin_token(db, server, agent.org_id, frozenset({Scope.ADMIN_READ})),
        ).json()["disabled"]
        is False
    )


def test_each_service_error_answers_the_status_its_code_means() -> None:
    assert status_of(AgentNotFound()) == 404
    assert status_of(TokenNotFound()) == 404
    assert status_of(SudoRequired(widens=("dailyCapUsd",))) == 403
    assert status_of(LastOwner()) == 409
    assert status_of(InvalidPolicy(reason="daily-cap: not a number")) == 400
    assert status_of(RuleNotFound()) == 404
    assert status_of(ScopeNotFound()) == 404
    assert status_of(PaymentNotFound()) == 404
    assert status_of(EntryNotFound()) == 404
    assert status_of(RuleRejected(RuleReason.INVALID_LIMIT, ["limitUsd"])) == 400
    assert status_of(PolicyNotFound()) == 503  # the server's side: retrying may help
