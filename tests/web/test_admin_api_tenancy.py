"""Every route of the admin API, driven from its table: a token of another organisation sees
nothing of the first and changes nothing of it. A new route joins this test by being in the table;
a route whose path parameter or body this test does not know fails it until it is taught. The
catalog is the server's, the same for every organisation: its entry is read by anyone."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from auth.scopes import Scope
from server.catalog.service import add_entry
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.vocabulary import Role
from server.web.api.routes import OPERATIONS
from tests.support.admin_api import admin_token, call, make_connection
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import RunningServer, serve
from tests.support.tenants import make_agent, make_member, make_team

# A valid body for each body model, so a refusal is about the organisation, not the body.
BODIES: dict[str, dict[str, Any]] = {
    "PolicyNarrowing": {"dailyCapUsd": "0.50"},
    "RoleChange": {"role": "viewer"},
    "MemberInvite": {"email": "newcomer@example.com", "role": "viewer"},
    "TokenIssue": {"scopes": ["payments:read"]},
    "AgentCreate": {"name": "intruders-own", "network": "eip155:84532"},
    "OrganizationChange": {"approvalTtlSeconds": 600, "name": "intruders-renamed"},
    "RuleCreate": {"scope": "agent", "scopeId": "{agent_id}", "kind": "hold", "host": "b.example.com"},
    "RuleChange": {"limitUsd": "0.01"},
}
# Operations whose body names the first organisation's agent: refused as not found.
NAMES_THE_FIRST = {"createRule"}
# The server's own catalog: the same for every organisation.
SHARED = {"getCatalogEntry"}


def _body(template: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    return {
        key: ids[value[1:-1]] if isinstance(value, str) and value[1:-1] in ids else value
        for key, value in template.items()
    }


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url, extra={"PAYWARDEN_RATE_LIMIT_ADMIN_API": "1000"}) as running:
        yield running


def test_another_organisations_token_sees_and_changes_nothing(server: RunningServer, db: Database) -> None:
    mine = make_agent(
        db, server.settings, allow_hosts=["api.example.com"], step_up="0.001", name="secret-agent"
    )
    member = make_member(db, mine.org_id, role=Role.OWNER, email="hidden-owner@example.com")
    make_team(db, mine.org_id, "hidden-team")
    held = reserve_now(db, mine.agent_id, facts("hidden", host="api.example.com"), SystemClock().now())
    assert held.approval is not None
    assert held.intent is not None
    grant_id = make_connection(db, server, mine.agent_id, name="hidden-robot")
    mine_writer = admin_token(db, server, mine.org_id, frozenset({Scope.ADMIN_WRITE}))
    token_id = call(server, "get", f"/agents/{mine.agent_id}/tokens", mine_writer).json()["tokens"][0]["id"]
    limit = {"scope": "agent", "scopeId": mine.agent_id, "kind": "limit", "limitUsd": "3", "window": "day"}
    rule_id = call(server, "post", "/rules", mine_writer, body=limit).json()["id"]
    with db.write() as session:
        entry_id = add_entry(
            session,
            name="Shared seller",
            host="shared.example.com",
            url="https://shared.example.com/x",
            price_usd=Decimal("0.01"),
            network="eip155:84532",
            category="data",
            pay_to=["0x" + "cd" * 20],
            actor="test",
            now=SystemClock().now(),
        ).id
    asked = call(server, "post", f"/agents/{mine.agent_id}/tokens", mine_writer, body=BODIES["TokenIssue"])
    change_id = asked.json()["changeId"]
    theirs = make_agent(db, server.settings, allow_hosts=["api.example.com"], name="their-agent")
    intruder = admin_token(db, server, theirs.org_id, frozenset({Scope.ADMIN_WRITE}))
    before = {path: call(server, "get", path, mine_writer).json() for path in _state_paths(mine.agent_id)}

    ids = {
        "agent_id": mine.agent_id,
        "member_id": member,
        "token_id": token_id,
        "connection_id": grant_id,
        "approval_id": held.approval.id,
        "change_id": change_id,
        "rule_id": rule_id,
        "payment_id": held.intent.id,
        "entry_id": entry_id,
        "host": "seller.example.com",  # a circuit: another organisation's clearing finds none of its own
    }
    secrets = [
        mine.agent_id,
        member,
        token_id,
        grant_id,
        held.approval.id,
        change_id,
        rule_id,
        held.intent.id,
        "secret-agent",
        "hidden-owner",
        "hidden-team",
        "hidden-robot",
        mine.org_id,
    ]
    for operation in OPERATIONS:
        path = operation.path
        for parameter in operation.parameters:
            if parameter.where == "path":
                assert parameter.name in ids, f"teach this test the path parameter {parameter.name}"
                path = path.replace("{" + parameter.name + "}", ids[parameter.name])
        body = None
        if operation.body is not None:
            assert operation.body.__name__ in BODIES, f"teach this test a body for {operation.operation_id}"
            body = _body(BODIES[operation.body.__name__], ids)
        query = {"agent": mine.agent_id} if any(p.name == "agent" for p in operation.parameters) else {}
        where = f"{operation.method.upper()} {operation.path}"

        answer = call(server, operation.method, path, intruder, body=body)
        if operation.operation_id in SHARED:
            assert answer.status_code == 200, f"{where}: {answer.text}"
        elif "{" in operation.path or operation.operation_id in NAMES_THE_FIRST:
            assert answer.status_code in {403, 404}, f"{where}: {answer.status_code} {answer.text}"
        else:  # its own organisation's (an invitation waits there for its own members' passkeys)
            assert answer.status_code == operation.status, f"{where}: {answer.text}"
        assert not any(secret in answer.text for secret in secrets), f"{where} showed {answer.text}"
        if query:  # the first organisation's agent as a filter is not found either
            filtered = call(server, operation.method, path, intruder, body=body, **query)
            assert filtered.status_code == 404, f"{where}?agent=: {filtered.text}"
            assert not any(secret in filtered.text for secret in secrets[1:]), f"{where}: {filtered.text}"

    after = {path: call(server, "get", path, mine_writer).json() for path in _state_paths(mine.agent_id)}
    assert after == before  # nothing of the first organisation changed


def _state_paths(agent_id: str) -> list[str]:
    return [
        "/agents",
        "/members",
        "/teams",
        f"/agents/{agent_id}/tokens",
        f"/agents/{agent_id}/policy",
        f"/agents/{agent_id}/wallet",
        "/payments",
        "/rules",
        "/organization",
    ]
