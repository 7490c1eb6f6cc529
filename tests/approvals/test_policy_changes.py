"""Policy change requests in the database, on SQLite and PostgreSQL: asking stores the exact change
and changes nothing; the same change asked again is the same request; at most five wait per agent,
even when many are asked at once; the note is checked and audited as the agent's own words;
requests lapse after 24 hours, and the expiry job writes that down once."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

import pytest
from sqlmodel import select

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.approvals import policy_changes
from server.approvals.errors import InvalidPolicyChange, PolicyChangeNotFound, PolicyChangeQueueFull
from server.kit.db import Database
from server.kit.errors import InvalidInput, PaywardenError
from server.models import AuditEvent, PolicyChangeRequest, PolicyVersion, RuleVersion
from server.payments.decisions import set_agent_disabled
from server.policy.requested_changes import parse_requested_change
from server.vocabulary import PolicyChangeStatus
from server.web.pages.policy_changes import outcome
from tests.support.clocks import written
from tests.support.paywarden import settings_for
from tests.support.tenants import AgentSetup, make_agent

NOW = written(2026, 12, 4, 9, 30)


def _agent(db: Database, **kw: object) -> AgentSetup:
    return make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"], **kw)  # type: ignore[arg-type]


def _principal(setup: AgentSetup) -> Principal:
    return Principal.for_agent(
        org_id=setup.org_id, agent_id=setup.agent_id, token_id="tok_test", scopes=AGENT_SCOPES
    )


def _ask(
    db: Database,
    setup: AgentSetup,
    change: dict[str, object],
    *,
    note: object = "The user needs it.",
    now: datetime = NOW,
) -> tuple[PolicyChangeRequest, bool]:
    with db.write() as session:
        return policy_changes.ask_for_change(
            session,
            _principal(setup),
            agent_id=setup.agent_id,
            change=parse_requested_change(change),
            note=note,
            now=now,
        )


def _versions(db: Database, setup: AgentSetup) -> tuple[list[int], list[tuple[str, int]]]:
    with db.read() as session:
        policies = sorted(
            row.version
            for row in session.exec(select(PolicyVersion).where(PolicyVersion.agent_id == setup.agent_id))
        )
        rules = sorted(
            (row.rule_id, row.version)
            for row in session.exec(select(RuleVersion).where(RuleVersion.org_id == setup.org_id))
        )
    return policies, rules


def test_asking_stores_the_exact_change_and_changes_nothing(db: Database) -> None:
    setup = _agent(db)
    before = _versions(db, setup)
    row, created = _ask(
        db,
        setup,
        {"addAllowHosts": ["New.Example"], "dailyCapUsd": "20"},
        note="  Needs the new API.\r\nThanks ",
    )
    assert created
    assert _versions(db, setup) == before
    assert row.id.startswith("pcr_")
    assert (row.status, row.policy_version, row.note) == ("pending", 2, "Needs the new API.\nThanks")
    assert row.change_json == (
        f'{{"agentId":"{setup.agent_id}","change":{{"addAllowHosts":["new.example"],"dailyCapUsd":"20.00"}},'
        f'"orgId":"{setup.org_id}"}}'
    )
    assert row.expires_at == NOW + timedelta(hours=24)
    with db.read() as session:
        (event,) = session.exec(select(AuditEvent).where(AuditEvent.subject_id == row.id)).all()
    assert (event.type, event.actor, event.agent_id) == (
        "policy_change.requested",
        f"agent:{setup.agent_id}",
        setup.agent_id,
    )
    assert event.data["change"] == {"addAllowHosts": ["new.example"], "dailyCapUsd": "20.00"}
    assert event.data["note"] == {"untrusted": True, "text": "Needs the new API.\nThanks"}
    assert event.data["policyVersion"] == 2


def test_the_same_change_asked_again_is_the_same_request(db: Database) -> None:
    setup = _agent(db)
    first, _ = _ask(db, setup, {"dailyCapUsd": "20", "addAllowHosts": ["b.example", "a.example"]})
    again, created = _ask(
        db, setup, {"addAllowHosts": ["a.example", "b.example"], "dailyCapUsd": 20}, note="Other words."
    )
    assert (again.id, created, again.note) == (first.id, False, "The user needs it.")
    other, created = _ask(db, setup, {"dailyCapUsd": "21", "addAllowHosts": ["a.example", "b.example"]})
    assert created
    assert other.id != first.id


def test_at_most_five_wait_per_agent_and_only_waiting_ones_count(db: Database) -> None:
    setup = _agent(db)
    neighbour = _agent(db, org_id=setup.org_id, name="neighbour")
    for n in range(5):
        _ask(db, setup, {"addAllowHosts": [f"h{n}.example"]}, now=NOW + timedelta(minutes=n))
    with pytest.raises(PolicyChangeQueueFull) as full:
        _ask(db, setup, {"addAllowHosts": ["h5.example"]})
    assert full.value.as_dict()["max"] == 5
    # Asking again for one that waits is not a sixth; another agent has its own five.
    assert _ask(db, setup, {"addAllowHosts": ["h2.example"]})[1] is False
    assert _ask(db, neighbour, {"addAllowHosts": ["h5.example"]})[1] is True
    # Once the first lapses (24 hours after it was asked), there is room for one more.
    later = NOW + timedelta(hours=24)
    assert _ask(db, setup, {"addAllowHosts": ["h5.example"]}, now=later)[1] is True
    with pytest.raises(PolicyChangeQueueFull):
        _ask(db, setup, {"addAllowHosts": ["h6.example"]}, now=later)


def test_many_asked_at_once_still_store_five(db: Database) -> None:
    setup = _agent(db)
    outcomes: list[str] = []
    start = threading.Barrier(10)

    def ask(n: int) -> None:
        start.wait()
        try:
            _ask(db, setup, {"addAllowHosts": [f"race{n}.example"]})
            outcomes.append("stored")
        except PaywardenError as error:
            outcomes.append(error.code)

    threads = [threading.Thread(target=ask, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["policy_change_queue_full"] * 5 + ["stored"] * 5
    with db.read() as session:
        stored = session.exec(
            select(PolicyChangeRequest).where(PolicyChangeRequest.agent_id == setup.agent_id)
        ).all()
    assert len(stored) == 5


@pytest.mark.parametrize(
    ("note", "reason"),
    [
        (None, "invalid_note"),
        ("   ", "invalid_note"),
        ("x" * 281, "invalid_note"),
        ("tab\there", "invalid_note"),
        ("right-to-left \u202eevorppa", "invalid_note"),
        ("zero\u200bwidth", "invalid_note"),
        ("use pw_at_" + "A" * 30, "contains_credential"),
        ("key 0x" + "ab" * 32, "contains_credential"),
    ],
)
def test_a_note_that_is_not_plain_short_text_is_refused(db: Database, note: object, reason: str) -> None:
    setup = _agent(db)
    with pytest.raises(InvalidInput) as refused:
        _ask(db, setup, {"dailyCapUsd": "20"}, note=note)
    assert refused.value.as_dict()["reason"] == reason
    with db.read() as session:
        assert (
            session.exec(
                select(PolicyChangeRequest).where(PolicyChangeRequest.agent_id == setup.agent_id)
            ).all()
            == []
        )


def test_a_note_of_280_characters_in_any_script_is_kept() -> None:
    note = "Ünïcödé ✓ 日本語 العربية " * 12
    assert policy_changes.clean_note(note[:280]) == note[:280].strip()


def test_a_change_that_gives_no_more_room_or_names_another_agents_rule_is_refused(db: Database) -> None:
    setup = _agent(db)
    other = _agent(db)
    with db.read() as session:
        foreign_rule = session.exec(
            select(RuleVersion.rule_id).where(RuleVersion.scope_id == other.agent_id)
        ).one()
    refusals: list[tuple[dict[str, object], str, list[str]]] = [
        ({"dailyCapUsd": "5"}, "not_wider", ["dailyCapUsd"]),
        ({"addAllowHosts": ["api.example.com"]}, "not_wider", ["addAllowHosts"]),
        ({"removeRules": [foreign_rule]}, "unknown_rule", ["removeRules"]),
    ]
    for change, reason, fields in refusals:
        with pytest.raises(InvalidPolicyChange) as refused:
            _ask(db, setup, change)
        assert (refused.value.as_dict()["reason"], refused.value.as_dict()["fields"]) == (reason, fields)


def test_an_agent_reads_only_its_own_requests(db: Database) -> None:
    setup = _agent(db)
    neighbour = _agent(db, org_id=setup.org_id, name="neighbour")
    row, _ = _ask(db, setup, {"dailyCapUsd": "20"})
    with db.read() as session:
        assert policy_changes.request_status(session, _principal(setup), row.id, now=NOW).status == "pending"
        for principal, request_id in [
            (_principal(neighbour), row.id),
            (_principal(setup), "pcr_" + "0" * 20),
        ]:
            with pytest.raises(PolicyChangeNotFound):
                policy_changes.request_status(session, principal, request_id, now=NOW)


def test_a_request_lapses_after_24_hours_and_the_job_writes_it_down_once(db: Database) -> None:
    setup = _agent(db)
    row, _ = _ask(db, setup, {"dailyCapUsd": "20"})
    with db.read() as session:
        assert (
            policy_changes.request_status(
                session, _principal(setup), row.id, now=NOW + timedelta(hours=23, minutes=59)
            ).status
            == "pending"
        )
        assert (
            policy_changes.request_status(
                session, _principal(setup), row.id, now=NOW + timedelta(hours=24)
            ).status
            == "expired"
        )
    later = NOW + timedelta(hours=24, seconds=1)
    for _ in range(2):
        with db.write() as session:
            policy_changes.expire_lapsed_changes(session, actor="system:test", now=later)
    with db.read() as session:
        stored = session.get(PolicyChangeRequest, row.id)
        events = session.exec(select(AuditEvent.type).where(AuditEvent.subject_id == row.id)).all()
    assert stored is not None
    assert stored.status == PolicyChangeStatus.EXPIRED
    assert sorted(events) == ["policy_change.expired", "policy_change.requested"]


def test_disabling_the_agent_rejects_what_it_asked_for_and_leaves_policy_alone(db: Database) -> None:
    setup = _agent(db)
    waiting, _ = _ask(db, setup, {"dailyCapUsd": "20"})
    other, _ = _ask(db, setup, {"addAllowHosts": ["more.example"]})
    before = _versions(db, setup)
    with db.write() as session:
        set_agent_disabled(
            session, Principal.operator("test:person"), agent_id=setup.agent_id, disabled=True, now=NOW
        )
    with db.read() as session:
        rows = {row.id: row for row in session.exec(select(PolicyChangeRequest))}
        events = session.exec(select(AuditEvent).where(AuditEvent.type == "policy_change.rejected")).all()
    assert {rows[waiting.id].status, rows[other.id].status} == {PolicyChangeStatus.REJECTED}
    assert rows[waiting.id].decided_by is None  # no member rejected it: the agent was disabled
    assert sorted(event.subject_id or "" for event in events) == sorted([waiting.id, other.id])
    assert all(event.data["reason"] == "agent_disabled" for event in events)
    assert _versions(db, setup) == before
    with db.read() as session:
        view = policy_changes.request_status(session, _principal(setup), waiting.id, now=NOW)
    assert view.status == PolicyChangeStatus.REJECTED
    said = outcome(rows[waiting.id], PolicyChangeStatus.REJECTED, None)
    assert said is not None
    assert said.startswith("Closed at ")
    assert said.endswith("when the agent was disabled: nothing changed")
