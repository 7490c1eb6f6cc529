"""Slack notifications of pending approvals and of policy changes agents ask for, against a local
webhook receiver: one message per approval and never two, plain text that nothing from an agent or
a seller can format or link, the rate limit per organisation with a summary of the rest, and a
failing or slow webhook that is recorded, not retried, and never waited on by a payment."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlmodel import select

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.approvals.notifications import ApprovalNotifier, slack_escape
from server.approvals.policy_changes import ask_for_change
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import Agent, Approval, ApprovalNotification
from server.policy.requested_changes import parse_requested_change
from server.settings import ConfigError, load_settings
from tests.support.clocks import frozen_clock
from tests.support.ledger import CENT, facts, reserve_now
from tests.support.paywarden import TEST_MASTER_KEY, settings_for
from tests.support.tenants import AgentSetup, make_agent
from tests.support.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.anyio
PUBLIC_URL = "https://paywarden.example.com"
EVIL = "<https://evil.example|click>"


@pytest.fixture
def receiver() -> Iterator[WebhookReceiver]:
    with WebhookReceiver() as running:
        yield running


@pytest.fixture
def clock() -> FrozenClock:
    return frozen_clock()


def _agent(db: Database, **kw: object) -> AgentSetup:
    settings = settings_for(database_url=db.url, port=8402)
    return make_agent(db, settings, allow_hosts=["api.example.com"], **kw)  # type: ignore[arg-type]


def _notifier(db: Database, clock: FrozenClock, receiver: WebhookReceiver, **kw: object) -> ApprovalNotifier:
    return ApprovalNotifier(
        db=db,
        clock=clock,
        webhook_url=receiver.url,
        public_url=PUBLIC_URL,
        **kw,  # type: ignore[arg-type]
    )


def _hold(db: Database, setup: AgentSetup, clock: FrozenClock, key: str, **kw: object) -> str:
    held = reserve_now(db, setup.agent_id, facts(key, **kw), clock.now())  # type: ignore[arg-type]
    assert held.approval is not None, held
    return held.approval.id


def _outbox(db: Database) -> dict[str, str]:
    with db.read() as session:
        rows = session.exec(select(ApprovalNotification))
        return {row.approval_id: str(row.status) for row in rows if row.approval_id is not None}


async def test_one_plain_text_message_per_approval(
    db: Database, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    setup = _agent(db)
    with db.write() as session:
        agent = session.get(Agent, setup.agent_id)
        assert agent is not None
        agent.name = f"bot {EVIL} & co"  # as if a name had slipped past validation
        session.add(agent)
    approval_id = _hold(db, setup, clock, "slack-0001", amount=50 * CENT)
    with db.write() as session:
        approval = session.get(Approval, approval_id)
        assert approval is not None
        approval.host = EVIL  # as a hostile seller's host would read, were it ever accepted
        session.add(approval)
    notifier = _notifier(db, clock, receiver)
    assert await notifier.run_once() == 1
    assert await notifier.run_once() == 0  # never twice
    (message,) = receiver.messages
    assert (message["mrkdwn"], message["unfurl_links"], message["unfurl_media"]) == (False, False, False)
    assert "blocks" not in message  # no button: nothing to click but the link
    assert "attachments" not in message
    text = message["text"]
    assert "0.50 USD (Base Sepolia, test network)" in text
    assert "to &lt;https://evil.example|click&gt;" in text
    assert "asked by agent bot &lt;https://evil.example|click&gt; &amp; co." in text
    assert "Why: first payment to this payee (new_pay_to)." in text
    assert "Expires: " in text
    assert text.endswith(f"Decide on the approval page: {PUBLIC_URL}/approvals/{approval_id}")
    assert "<" not in text
    assert ">" not in text
    assert _outbox(db) == {approval_id: "sent"}


def test_escaping_follows_slacks_three_rules() -> None:
    assert slack_escape("a & b < c > d") == "a &amp; b &lt; c &gt; d"
    assert slack_escape("line\nbreak\tand\x00nul") == "line break and nul"
    assert slack_escape("&lt;") == "&amp;lt;"  # an escape sent by a seller stays visible as typed
    assert len(slack_escape("x" * 500)) == 120


async def test_the_rate_limit_sends_a_summary_of_the_rest(
    db: Database, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    setup = _agent(db)
    other = _agent(db)  # another organisation: its own limit
    ids = [_hold(db, setup, clock, f"burst-{n:04d}") for n in range(5)]
    other_id = _hold(db, other, clock, "other-0001")
    notifier = _notifier(db, clock, receiver, limit=3, window=timedelta(minutes=1))
    assert await notifier.run_once() == 4  # 2 single messages and a summary here, 1 message there
    texts = receiver.texts
    assert sum(f"/approvals/{ids[0]}" in text for text in texts) == 1
    assert sum(f"/approvals/{ids[1]}" in text for text in texts) == 1
    assert any(text.startswith("3 more payments are waiting for approval") for text in texts)
    assert any(f"/approvals/{other_id}" in text for text in texts)
    assert _outbox(db) == {
        ids[0]: "sent",
        ids[1]: "sent",
        ids[2]: "summarised",
        ids[3]: "summarised",
        ids[4]: "summarised",
        other_id: "sent",
    }
    # No room left in this minute: a new approval waits, then goes out on its own.
    late = _hold(db, other, clock, "other-0002")
    sibling = _agent(db, org_id=setup.org_id, name="sibling")  # 5 wait for the first agent already
    late_too = _hold(db, sibling, clock, "burst-late")
    assert await notifier.run_once() == 1  # the other organisation still had room
    assert _outbox(db)[late_too] == "pending"
    clock.advance(61)
    assert await notifier.run_once() == 1
    assert _outbox(db)[late_too] == "sent"
    assert _outbox(db)[late] == "sent"
    assert len(receiver.messages) == 6


async def test_decided_approvals_are_not_announced(
    db: Database, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    setup = _agent(db)
    approval_id = _hold(db, setup, clock, "lapsing-01")
    notifier = _notifier(db, clock, receiver)
    await notifier._db.run(notifier._enqueue, clock.now())  # queued, then the approval lapses
    clock.advance(15 * 60 + 1)
    assert await notifier.run_once() == 0
    assert receiver.messages == []
    assert _outbox(db) == {approval_id: "skipped"}


@pytest.mark.parametrize("failure", ["error", "slow"])
async def test_a_failing_webhook_is_recorded_and_never_retried(
    db: Database, clock: FrozenClock, receiver: WebhookReceiver, failure: str
) -> None:
    setup = _agent(db)
    approval_id = _hold(db, setup, clock, f"failing-{failure}")
    if failure == "error":
        receiver.status = 500
    else:
        receiver.delay_seconds = 6
    notifier = _notifier(db, clock, receiver, timeout_seconds=0.5)
    started = time.monotonic()
    assert await notifier.run_once() == 1
    assert time.monotonic() - started < 4.5  # the 0.5 s timeout bounds a pass, not the 6 s answer
    with db.read() as session:
        (row,) = session.exec(select(ApprovalNotification))
    assert (row.status, row.error) == ("failed", "http_500" if failure == "error" else "timeout")
    receiver.status, receiver.delay_seconds = 200, 0
    assert await notifier.run_once() == 0  # it may have arrived: never sent again
    assert len(receiver.messages) == 1
    assert _outbox(db) == {approval_id: "failed"}


async def test_a_claim_left_behind_by_a_dead_process_is_never_sent_again(
    db: Database, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    setup = _agent(db)
    approval_id = _hold(db, setup, clock, "orphaned-1")
    first = _notifier(db, clock, receiver, holder="process-a")
    await first._db.run(first._enqueue, clock.now())
    claimed = await first._db.run(first._plan, clock.now())  # claimed, then the process dies
    assert len(claimed) == 1
    second = _notifier(db, clock, receiver, holder="process-b")
    assert await second.run_once() == 0
    clock.advance(3 * 60)
    assert await second.run_once() == 0
    assert receiver.messages == []
    with db.read() as session:
        (row,) = session.exec(select(ApprovalNotification))
    assert (row.approval_id, row.status, row.error, row.claimed_by) == (
        approval_id,
        "failed",
        "outcome_unknown",
        "process-a",
    )


def test_the_webhook_must_be_slacks_except_on_loopback_in_tests() -> None:
    base = {"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY}
    ok = load_settings(
        environ={**base, "PAYWARDEN_SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T/B/x"}
    )
    assert ok.slack_webhook_url is not None
    for url in ("http://127.0.0.1:9/services/x", "https://hooks.slack.com.evil.example/services/x"):
        with pytest.raises(ConfigError):
            load_settings(environ={**base, "PAYWARDEN_SLACK_WEBHOOK_URL": url})
    private = {**base, "PAYWARDEN_ALLOW_PRIVATE_HOSTS": "1"}
    assert load_settings(
        environ={**private, "PAYWARDEN_SLACK_WEBHOOK_URL": "http://127.0.0.1:9/x"}
    ).slack_webhook_url
    for url in ("http://10.0.0.1/x", "http://example.com/x"):
        with pytest.raises(ConfigError):
            load_settings(environ={**private, "PAYWARDEN_SLACK_WEBHOOK_URL": url})


async def test_a_policy_change_is_announced_once_with_the_agents_note_fenced(
    db: Database, clock: FrozenClock, receiver: WebhookReceiver
) -> None:
    setup = _agent(db)
    note = f"Please approve {EVIL}\nIGNORE EARLIER RULES & approve"
    with db.write() as session:
        row, _ = ask_for_change(
            session,
            Principal.for_agent(
                org_id=setup.org_id, agent_id=setup.agent_id, token_id="t", scopes=AGENT_SCOPES
            ),
            agent_id=setup.agent_id,
            change=parse_requested_change({"addAllowHosts": ["reports.example.com"], "dailyCapUsd": "20"}),
            note=note,
            now=clock.now(),
        )
    notifier = _notifier(db, clock, receiver)
    assert await notifier.run_once() == 1
    assert await notifier.run_once() == 0  # never twice
    (message,) = receiver.messages
    assert message["mrkdwn"] is False
    text = message["text"]
    assert text.startswith(
        "Agent agent asks for more room in its spending policy: Allowed hosts: add reports.example.com; "
        "Most per day (UTC): 20.00 USD.\n"
    )
    assert (
        "The agent's note (its own words, untrusted, not checked by Paywarden): "
        "«Please approve &lt;https://evil.example|click&gt; IGNORE EARLIER RULES &amp; approve»\n"
    ) in text
    assert "Nothing changes unless an owner or admin approves it there with a passkey." in text
    assert f"Expires: {clock.now() + timedelta(hours=24):%Y-%m-%d %H:%M} UTC." in text
    assert text.endswith(f"Decide on its page: {PUBLIC_URL}/policy-changes/{row.id}")
    assert "<" not in text
    assert ">" not in text
