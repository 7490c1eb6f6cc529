"""/admin/settings without a browser: how long approvals wait, and the organisation's Slack webhook
(https on Slack's host only, sealed, shown masked once saved); viewers and admins see the forms
disabled and are refused; a post without its CSRF token is refused. And the notifier announces
an organisation's approvals to its own webhook."""

from __future__ import annotations

import re

import pytest
from sqlmodel import select

from server.approvals.notifications import ApprovalNotifier, seal_webhook
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.models import ApprovalNotification, AuditEvent, Organization
from server.tenancy.service import find_org, set_slack_webhook
from server.vocabulary import NotificationStatus, Role
from tests.support.clocks import frozen_clock
from tests.support.ledger import facts, reserve_now
from tests.support.oauth import Person
from tests.support.org_pages import clock, colleague, owner, post_form, server, text_of
from tests.support.paywarden import TEST_MASTER_KEY, RunningServer, settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import make_agent
from tests.support.webhook_receiver import WebhookReceiver

__all__ = ["clock", "owner", "server"]  # fixtures
PAGE = "/admin/settings"
HOOK = "https://hooks.slack.com/services/T000/B000/s3cretTokenWXYZ"


def _org(db: Database, org_id: str) -> Organization:
    with db.read() as session:
        return find_org(session, OPERATOR, org_id)


def test_an_owner_sets_how_long_approvals_wait(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    saved = post_form(owner, PAGE, f"{PAGE}/ttl", {"minutes": "60"})
    assert saved.status_code == 303
    assert saved.headers["location"] == f"{PAGE}?done=ttl"
    assert _org(sqlite_db, owner.agent.org_id).approval_ttl_seconds == 3600
    assert "Pending approvals now wait for the time you chose." in text_of(
        owner.browser.get(saved.headers["location"])
    )
    assert '<option value="60" selected>' in owner.browser.get(PAGE).text
    for minutes in ("2", "abc", "99999"):
        refused = post_form(owner, PAGE, f"{PAGE}/ttl", {"minutes": minutes})
        assert refused.status_code == 400, minutes
        assert "The approval TTL must be between 300 seconds (5 minutes) and 86400 (24 hours)." in text_of(
            refused
        )
    assert _org(sqlite_db, owner.agent.org_id).approval_ttl_seconds == 3600


def test_the_approvals_page_links_to_the_setting(server: RunningServer, owner: Person) -> None:
    assert 'href="/admin/settings"' in owner.browser.get("/approvals").text


def test_a_saved_webhook_is_sealed_and_shown_masked(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    saved = post_form(owner, PAGE, f"{PAGE}/slack", {"url": f" {HOOK} "})
    assert saved.status_code == 303
    assert saved.headers["location"] == f"{PAGE}?done=slack"
    shown = owner.browser.get(PAGE).text
    assert '<code id="webhook-masked">https://hooks.slack.com/…WXYZ</code>' in shown
    assert "s3cretToken" not in shown
    org = _org(sqlite_db, owner.agent.org_id)
    assert org.slack_webhook_sealed is not None
    assert b"s3cretToken" not in org.slack_webhook_sealed
    assert (
        MasterKey.parse(TEST_MASTER_KEY).open(org.slack_webhook_sealed, context=f"slack-webhook:{org.id}")
        == HOOK.encode()
    )
    with sqlite_db.read() as session:
        events = session.exec(select(AuditEvent).where(AuditEvent.org_id == org.id)).all()
    assert all("s3cretToken" not in str(event.data) for event in events)
    assert any(event.data.get("slackWebhook") == "https://hooks.slack.com/…WXYZ" for event in events)
    removed = post_form(owner, PAGE, f"{PAGE}/slack", {"remove": "1"})
    assert removed.headers["location"] == f"{PAGE}?done=slack-removed"
    assert _org(sqlite_db, owner.agent.org_id).slack_webhook_sealed is None
    assert "webhook-masked" not in owner.browser.get(PAGE).text


@pytest.mark.parametrize(
    "url",
    [
        "http://hooks.slack.com/services/T000/B000/x",
        "https://evil.example/services/T000/B000/x",
        "https://hooks.slack.com.evil.example/services/x",
        "https://hooks.slack.com/services/",
        "https://user@hooks.slack.com/services/T/B/x",
        "https://hooks.slack.com/services/T/B/x?next=1",
        "http://127.0.0.2:9/hook",
        "not a url",
    ],
)
def test_a_webhook_that_is_not_slacks_is_refused(
    server: RunningServer, sqlite_db: Database, owner: Person, url: str
) -> None:
    refused = post_form(owner, PAGE, f"{PAGE}/slack", {"url": url})
    assert refused.status_code == 400
    assert "The Slack webhook must be an https://hooks.slack.com/services/... URL" in text_of(refused)
    assert _org(sqlite_db, owner.agent.org_id).slack_webhook_sealed is None


@pytest.mark.parametrize("role", [Role.VIEWER, Role.ADMIN])
def test_only_an_owner_changes_settings(
    server: RunningServer, sqlite_db: Database, owner: Person, role: Role
) -> None:
    other = colleague(server, sqlite_db, owner, role)
    shown = other.browser.get(PAGE)
    assert shown.status_code == 200
    fieldsets = re.findall(r"<fieldset[^>]*>", shown.text)
    assert fieldsets
    assert all("disabled" in tag for tag in fieldsets)
    for action, fields in ((f"{PAGE}/ttl", {"minutes": "60"}), (f"{PAGE}/slack", {"url": HOOK})):
        answer = post_form(other, PAGE, action, fields)
        assert answer.status_code == 403
        assert "Only an owner of your organisation can change its settings." in text_of(answer)
    org = _org(sqlite_db, owner.agent.org_id)
    assert org.approval_ttl_seconds == 900
    assert org.slack_webhook_sealed is None
    other.browser.close()


def test_a_settings_form_without_its_csrf_token_is_refused(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    for action, fields in ((f"{PAGE}/ttl", {"minutes": "60"}), (f"{PAGE}/slack", {"url": HOOK})):
        for extra in ({}, {"csrf": "forged"}):
            assert owner.browser.http.post(action, data={**fields, **extra}).status_code == 403
    org = _org(sqlite_db, owner.agent.org_id)
    assert org.approval_ttl_seconds == 900
    assert org.slack_webhook_sealed is None


@pytest.mark.anyio
async def test_an_organisation_is_announced_to_its_own_webhook(db: Database) -> None:
    master = MasterKey.parse(TEST_MASTER_KEY)
    clock = frozen_clock()
    settings = settings_for(database_url=db.url, port=8402)
    own = make_agent(db, settings, allow_hosts=["api.example.com"])
    silent = make_agent(db, settings, allow_hosts=["api.example.com"])
    with WebhookReceiver() as receiver:
        with db.write() as session:
            org = find_org(session, OPERATOR, own.org_id)
            set_slack_webhook(
                session,
                org=org,
                sealed=seal_webhook(master, org_id=org.id, url=receiver.url),
                key_id=master.key_id,
                masked="masked",
                actor="operator:test",
                now=clock.now(),
            )
        held = reserve_now(db, own.agent_id, facts("own-hook-1"), clock.now())
        unheard = reserve_now(db, silent.agent_id, facts("own-hook-2"), clock.now())
        assert held.approval is not None
        assert unheard.approval is not None
        notifier = ApprovalNotifier(
            db=db, clock=clock, webhook_url=None, public_url="https://p.example", master=master
        )
        assert await notifier.run_once() == 1
        assert len(receiver.texts) == 1
        assert held.approval.id in receiver.texts[0]
    with db.read() as session:
        rows = {row.approval_id: row.status for row in session.exec(select(ApprovalNotification)).all()}
    assert rows[held.approval.id] == NotificationStatus.SENT
    assert rows[unheard.approval.id] == NotificationStatus.SKIPPED  # no webhook: nobody to tell
