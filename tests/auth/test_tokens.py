"""Bearer tokens: issued once, stored as hashes, checked for audience, expiry and revocation."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Connection
from sqlmodel import select

from auth.principal import Principal
from auth.scopes import Scope, ScopeError, parse_scopes
from auth.tokens import TokenAlreadyIssued, hash_secret, issue_access_token, revoke_token
from auth.verifier import InvalidToken, TokenVerifier
from server.kit.clock import FrozenClock, SystemClock
from server.kit.db import Database
from server.kit.errors import PaywardenError
from server.models import AccessToken, Agent, AuditEvent
from server.tenancy.service import create_agent, create_org
from tests.support.clocks import frozen_clock

AUDIENCE = "http://127.0.0.1:8402/mcp"


def _agent(db: Database) -> tuple[str, str]:
    now = SystemClock().now()
    with db.write() as session:
        org = create_org(session, name="acme", actor="test", now=now)
        agent = create_agent(session, org=org, name="bot", network="eip155:84532", actor="test", now=now)
    return org.id, agent.id


def _issue(
    db: Database, org_id: str, agent_id: str | None, clock: FrozenClock, ttl: int = 3600
) -> tuple[str, str]:
    with db.write() as session:
        issued = issue_access_token(
            session,
            org_id=org_id,
            agent_id=agent_id,
            scopes=frozenset({Scope.PAYMENTS_READ}),
            audience=AUDIENCE,
            ttl_seconds=ttl,
            created_by="test",
            now=clock.now(),
        )
    return issued.token_id, issued.token


def test_only_the_hash_is_stored_and_the_token_verifies(db: Database) -> None:
    org_id, agent_id = _agent(db)
    clock = frozen_clock()
    token_id, token = _issue(db, org_id, agent_id, clock)
    assert token.startswith("pw_at_")
    with db.read() as session:
        row = session.get(AccessToken, token_id)
        assert row is not None
        assert row.token_hash == hash_secret(token)
        assert token not in {str(v) for v in row.model_dump().values()}
        events = session.exec(select(AuditEvent).where(AuditEvent.subject_id == token_id)).all()
        assert [e.type for e in events] == ["token.issued"]
    principal = TokenVerifier(db, clock).verify(token, audience=AUDIENCE)
    assert (principal.org_id, principal.agent_id, principal.scopes) == (
        org_id,
        agent_id,
        frozenset({Scope.PAYMENTS_READ}),
    )


def test_expired_revoked_foreign_and_unknown_tokens_are_refused(db: Database) -> None:
    org_id, agent_id = _agent(db)
    clock = frozen_clock()
    verifier = TokenVerifier(db, clock)
    _, token = _issue(db, org_id, agent_id, clock, ttl=60)

    with pytest.raises(InvalidToken, match="another resource"):
        verifier.verify(token, audience="https://elsewhere.example/mcp")
    clock.advance(61)
    with pytest.raises(InvalidToken, match="expired"):
        verifier.verify(token, audience=AUDIENCE)

    token_id, token = _issue(db, org_id, agent_id, clock)
    with db.write() as session:
        revoke_token(session, Principal.operator("test"), token_id=token_id, now=clock.now())
    with pytest.raises(InvalidToken, match="revoked"):
        verifier.verify(token, audience=AUDIENCE)

    with pytest.raises(InvalidToken, match="not known"):
        verifier.verify("pw_at_" + "x" * 43, audience=AUDIENCE)
    with pytest.raises(InvalidToken, match="malformed"):
        verifier.verify("Bearer nonsense", audience=AUDIENCE)


def test_an_agent_token_can_never_carry_admin(db: Database) -> None:
    org_id, agent_id = _agent(db)
    with pytest.raises(ScopeError):
        parse_scopes("payments:read admin", for_agent=True)
    with pytest.raises(ScopeError):
        parse_scopes("payments:read wallet:drain", for_agent=True)
    with db.write() as session, pytest.raises(PaywardenError):
        issue_access_token(
            session,
            org_id=org_id,
            agent_id=agent_id,
            scopes=frozenset({Scope.ADMIN}),
            audience=AUDIENCE,
            ttl_seconds=60,
            created_by="test",
            now=SystemClock().now(),
        )


def test_ttl_bounds_are_enforced(db: Database) -> None:
    org_id, agent_id = _agent(db)
    clock = frozen_clock()
    with pytest.raises(PaywardenError):
        _issue(db, org_id, agent_id, clock, ttl=10)
    with pytest.raises(PaywardenError):
        _issue(db, org_id, agent_id, clock, ttl=int(timedelta(days=400).total_seconds()))


def test_a_token_is_verified_with_one_statement_and_a_disabled_agent_at_once(db: Database) -> None:
    org_id, agent_id = _agent(db)
    clock = frozen_clock()
    verifier = TokenVerifier(db, clock)
    _, token = _issue(db, org_id, agent_id, clock)
    sent: list[str] = []

    def record(_conn: Connection, _cursor: Any, statement: str, *_: Any) -> None:
        if not statement.startswith(("BEGIN", "COMMIT", "ROLLBACK")):
            sent.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        assert verifier.verify(token, audience=AUDIENCE).agent_id == agent_id
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    assert len(sent) == 1, sent  # the token and its agent's standing together; nothing cached

    with db.write() as session:
        agent = session.get(Agent, agent_id)
        assert agent is not None
        agent.disabled_at = clock.now()
        session.add(agent)
    with pytest.raises(InvalidToken, match="disabled"):
        verifier.verify(token, audience=AUDIENCE)


def test_a_token_named_ahead_is_issued_once_however_many_ask_at_once(db: Database) -> None:
    """A form's nonce names its token: requests racing with the same id issue one token (and one
    audit event); the others are told it was issued already and write nothing."""
    org_id, agent_id = _agent(db)
    clock = frozen_clock()
    barrier = threading.Barrier(4)

    def ask(_: int) -> str:
        barrier.wait(timeout=10)
        try:
            with db.write() as session:
                issue_access_token(
                    session,
                    org_id=org_id,
                    agent_id=agent_id,
                    scopes=frozenset({Scope.PAYMENTS_READ}),
                    audience=AUDIENCE,
                    ttl_seconds=3600,
                    created_by="test",
                    now=clock.now(),
                    token_id="tok_0123456789abcdef0123",
                )
        except TokenAlreadyIssued:
            return "refused"
        return "issued"

    with ThreadPoolExecutor(max_workers=4) as pool:
        answers = sorted(pool.map(ask, range(4)))
    assert answers == ["issued", "refused", "refused", "refused"]
    with db.read() as session:
        rows = session.exec(select(AccessToken).where(AccessToken.agent_id == agent_id)).all()
        events = session.exec(select(AuditEvent).where(AuditEvent.type == "token.issued")).all()
    assert [row.id for row in rows] == ["tok_0123456789abcdef0123"]
    assert [event.subject_id for event in events if event.org_id == org_id] == ["tok_0123456789abcdef0123"]
