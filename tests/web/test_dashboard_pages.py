"""The dashboard without a browser: the overview (today's spend against the caps, the approvals
waiting, the 30-day chart and its table) and the agent page's forms (the policy, tokens,
disabling), each valid, invalid with its message beside the field, refused for a viewer, and
refused without its CSRF token. A change that widens goes to the sudo page and changes nothing."""

from __future__ import annotations

import html
import json
import re
import secrets
from collections.abc import Iterator
from datetime import datetime

import httpx
import pytest
from sqlmodel import select

from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AccessToken, Agent, AuditEvent, OutOfPolicyFinding
from server.policy.model import Policy
from server.policy.service import current_policy
from server.vocabulary import FindingKind, Role
from server.web.pages import agents as agent_pages
from tests.support.clocks import frozen_clock
from tests.support.oauth import Person, csrf_of, enrolled_person
from tests.support.payment_rows import write_payments
from tests.support.paywarden import RunningServer, serve

WALLET_KEY = "0x" + "11" * 32


@pytest.fixture
def clock() -> FrozenClock:
    return frozen_clock()


@pytest.fixture
def server(sqlite_db: Database, clock: FrozenClock) -> Iterator[RunningServer]:
    # An RPC that refuses every connection: the wallet's balance cannot be read.
    closed = json.dumps({"eip155:84532": "http://127.0.0.1:9/"})
    with serve(
        sqlite_db.url, public_host="localhost", clock=clock, extra={"PAYWARDEN_RPC_URLS": closed}
    ) as running:
        yield running


@pytest.fixture
def owner(server: RunningServer, sqlite_db: Database) -> Iterator[Person]:
    person = enrolled_person(server, sqlite_db)
    yield person
    person.browser.close()


def _text(response: httpx.Response) -> str:
    """The page's words: tags dropped, spaces collapsed."""
    words = re.sub(r"<[^>]+>", "", response.text)
    return re.sub(r"\s+", " ", html.unescape(words))


def _policy(db: Database, agent_id: str) -> Policy:
    with db.read() as session:
        agent = session.get(Agent, agent_id)
        assert agent is not None
        return current_policy(session, agent)


def _page(person: Person) -> tuple[str, httpx.Response]:
    path = f"/admin/agents/{person.agent.agent_id}"
    page = person.browser.get(path)
    assert page.status_code == 200, page.text
    return path, page


def _policy_form(policy: Policy, **changes: str | list[str]) -> dict[str, str | list[str]]:
    """The policy form as the page fills it in, with `changes` typed over it."""
    values = agent_pages.form_values(policy)
    form: dict[str, str | list[str]] = {name: values[name] for name in agent_pages.TEXT_FIELDS}
    form["networks"] = list(policy.networks)
    if policy.allow_catalog_hosts:
        form["allow_catalog_hosts"] = "on"
    if policy.verified_sellers_only:
        form["verified_sellers_only"] = "on"
    form.update(changes)
    return form


def test_the_overview_shows_todays_spend_against_the_caps_and_the_month_as_a_chart(
    server: RunningServer, owner: Person, sqlite_db: Database, clock: FrozenClock
) -> None:
    written = write_payments(
        sqlite_db,
        org_id=owner.agent.org_id,
        agents=[owner.agent.agent_id],
        count=120,
        now=clock.now(),
        days=40,
    )
    page = owner.browser.get("/admin")
    assert page.status_code == 200
    text = _text(page)
    spent = written.spent_today_atomic.get(owner.agent.agent_id, 0)
    dollars = f"${spent / 1_000_000:.6f}".rstrip("0")
    dollars = dollars + "0" * max(0, 2 - len(dollars.split(".")[1]))
    assert f"{dollars} of its $10.00 daily cap ({spent * 100 // 10_000_000}%)" in text
    assert "At most $1.00 a payment" in text
    assert '<meter min="0" max="10000000"' in page.text
    assert f'value="{spent}"' in page.text
    assert "0 approvals wait in your inbox" in text
    assert 'href="/approvals"' in page.text
    # The chart, drawn on the server, with its title, description and table.
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="chart"' in page.text
    assert "Spend per day," in text
    assert "Bars per day, stacked by agent, 1 agents" in text
    table = page.text.split('id="spend-table"')[1].split("</table>")[0]
    assert table.count("<tr>") == 31  # the header and 30 days
    assert f'href="/admin/agents/{owner.agent.agent_id}"' in page.text


def test_the_agent_page_shows_policy_wallet_payments_and_tokens(
    server: RunningServer, owner: Person, sqlite_db: Database, clock: FrozenClock
) -> None:
    from tests.support.tenants import make_agent

    paying = make_agent(
        sqlite_db,
        server.settings,
        allow_hosts=["api.example.com"],
        org_id=owner.agent.org_id,
        wallet_key=WALLET_KEY,
        name="payer",
        clock=clock,
    )
    write_payments(
        sqlite_db, org_id=owner.agent.org_id, agents=[paying.agent_id], count=5, now=clock.now(), days=2
    )
    with sqlite_db.write() as session:
        session.add(
            OutOfPolicyFinding(
                id="oop_dashboard1",
                org_id=owner.agent.org_id,
                agent_id=paying.agent_id,
                wallet_address="0x" + "22" * 20,
                network="eip155:84532",
                asset="0x036CbD53842c5426634e7929541eC2318f3dCF7e",
                tx_hash="0x" + "ef" * 32,
                log_index=0,
                block_number=7,
                kind=FindingKind.PAY_TO_MISMATCH,
                amount_atomic=250_000,
                detected_at=clock.now(),
            )
        )
    page = owner.browser.get(f"/admin/agents/{paying.agent_id}")
    assert page.status_code == 200
    text = _text(page)
    assert "<h1>payer</h1>" in page.text
    assert 'name="daily_cap_usd" value="10.00"' in page.text
    assert ">api.example.com</textarea>" in page.text
    # The RPC refuses: the balance is unavailable, the page is still the agent's page.
    assert "unavailable: the network did not answer" in text
    assert "https://sepolia.basescan.org/address/0x" in page.text
    assert page.text.count("https://sepolia.basescan.org/tx/0x") >= 4  # the settled ones
    assert "pay to mismatch, $0.25," in text
    assert f'href="https://sepolia.basescan.org/tx/0x{"ef" * 32}">the transaction</a>' in page.text
    assert "Revoke tok_" in text  # the agent's token, listed without its secret
    assert paying.token not in page.text
    assert "limit $50.00 per week (agent rule, from default)" in text  # the rule every agent gets


def test_lowering_the_daily_cap_applies_at_once(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    path, page = _page(owner)
    before = _policy(sqlite_db, owner.agent.agent_id)
    form = {**_policy_form(before, daily_cap_usd="2.50"), "csrf": csrf_of(page.text)}
    done = owner.browser.http.post(f"{path}/policy", data=form)
    assert done.status_code == 303
    assert done.headers["location"] == f"{path}?done=policy#policy"
    after = _policy(sqlite_db, owner.agent.agent_id)
    assert after.version == before.version + 1
    assert str(after.daily_cap_usd) == "2.50"
    assert after.allow_hosts == before.allow_hosts
    assert after.max_usd_per_tx == before.max_usd_per_tx
    shown = owner.browser.get(f"{path}?done=policy")
    assert "The policy was changed: the new version applies to the agent's next payment." in _text(shown)
    assert f"under policy version {after.version}." in _text(shown)
    with sqlite_db.read() as session:
        event = session.exec(
            select(AuditEvent).where(AuditEvent.type == "policy.changed").order_by(AuditEvent.seq.desc())  # type: ignore[attr-defined]
        ).first()
    assert event is not None
    assert event.actor == f"member:{owner.member_id}"


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"daily_cap_usd": "lots"}, "daily_cap_usd", "daily-cap:"),
        ({"max_usd_per_tx": "-1"}, "max_usd_per_tx", "max-per-tx:"),
        ({"deny_hosts": "not a host!"}, "deny_hosts", "deny-host:"),
        ({"pay_to_deny": "bob"}, "pay_to_deny", "pay-to-deny: 'bob' is not an address"),
        ({"velocity_window_seconds": "0"}, "velocity_window_seconds", "velocity window: between 1 and 86400"),
        ({"velocity_max_tx": "many"}, "velocity_max_tx", "velocity tx: a whole number"),
        ({"challenge_path_prefixes": "no-slash"}, "challenge_path_prefixes", "challenge-path:"),
        ({"networks": []}, "networks", "networks: choose at least one network."),
    ],
)
def test_an_invalid_setting_is_refused_with_its_message_beside_the_field(
    server: RunningServer,
    owner: Person,
    sqlite_db: Database,
    changes: dict[str, str],
    field: str,
    message: str,
) -> None:
    path, page = _page(owner)
    before = _policy(sqlite_db, owner.agent.agent_id)
    form = {**_policy_form(before, **changes), "csrf": csrf_of(page.text)}
    refused = owner.browser.http.post(f"{path}/policy", data=form)
    assert refused.status_code == 400
    text = _text(refused)
    assert "The policy was not changed: correct the settings marked below." in text
    error = re.search(rf'<p class="field-error" id="{field}-error">([^<]*)</p>', refused.text)
    assert error is not None, refused.text
    assert html.unescape(error.group(1)).startswith(message)
    if field != "networks":
        assert f'id="{field}" name="{field}"' in refused.text
        assert re.search(rf'id="{field}" name="{field}"[^>]*aria-invalid="true"', refused.text)
    assert _policy(sqlite_db, owner.agent.agent_id) == before


@pytest.mark.parametrize(
    "changes",
    [
        {"daily_cap_usd": "10.01"},
        {"allow_hosts": "api.example.com\nnew.example.com"},
        {"networks": ["eip155:84532", "eip155:8453"]},
        {"allow_catalog_hosts": "on"},
        {"step_up_threshold_usd": ""},
    ],
    ids=["raise-cap", "add-host", "add-network", "catalog", "threshold-off"],
)
def test_a_widening_change_goes_to_the_sudo_page_and_changes_nothing(
    server: RunningServer, owner: Person, sqlite_db: Database, changes: dict[str, str]
) -> None:
    path, page = _page(owner)
    if "step_up_threshold_usd" in changes:  # a threshold to remove first (lowering it is narrowing)
        form = {**_policy_form(_policy(sqlite_db, owner.agent.agent_id), step_up_threshold_usd="0.40")}
        assert (
            owner.browser.http.post(f"{path}/policy", data={**form, "csrf": csrf_of(page.text)}).status_code
            == 303
        )
    before = _policy(sqlite_db, owner.agent.agent_id)
    form = {**_policy_form(before, **changes), "csrf": csrf_of(page.text)}
    moved = owner.browser.http.post(f"{path}/policy", data=form)
    assert moved.status_code == 303
    assert moved.headers["location"] == f"/account/sudo?next=%2Fadmin%2Fagents%2F{owner.agent.agent_id}"
    assert _policy(sqlite_db, owner.agent.agent_id) == before


def test_a_velocity_or_challenge_limit_emptied_is_refused_not_kept_silently(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    path, page = _page(owner)
    csrf = csrf_of(page.text)
    start = _policy(sqlite_db, owner.agent.agent_id)
    limits = {"velocity_max_tx": "5", "challenge_max_usd": "0.50"}
    assert (
        owner.browser.http.post(
            f"{path}/policy", data={**_policy_form(start, **limits), "csrf": csrf}
        ).status_code
        == 303
    )
    limited = _policy(sqlite_db, owner.agent.agent_id)
    assert limited.velocity.max_tx == 5
    for field, setting in (("velocity_max_tx", "velocity tx"), ("challenge_max_usd", "challenge-max")):
        form = {**_policy_form(limited, **{field: ""}), "csrf": csrf}
        refused = owner.browser.http.post(f"{path}/policy", data=form)
        assert refused.status_code == 400
        assert f"{setting}: this limit can be changed here but not removed; give it a value." in _text(
            refused
        )
    assert _policy(sqlite_db, owner.agent.agent_id) == limited


def test_in_sudo_mode_a_widening_change_is_made(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    owner.browser.sudo()
    path, page = _page(owner)
    before = _policy(sqlite_db, owner.agent.agent_id)
    form = {
        **_policy_form(before, daily_cap_usd="25.00", allow_catalog_hosts="on"),
        "csrf": csrf_of(page.text),
    }
    done = owner.browser.http.post(f"{path}/policy", data=form)
    assert done.headers["location"] == f"{path}?done=policy#policy"
    after = _policy(sqlite_db, owner.agent.agent_id)
    assert after.version == before.version + 1
    assert str(after.daily_cap_usd) == "25.00"
    assert after.allow_catalog_hosts is True


def test_a_viewer_sees_every_form_disabled_and_may_post_nothing(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    viewer = enrolled_person(server, sqlite_db, role=Role.VIEWER, org_id=owner.agent.org_id)
    try:
        path = f"/admin/agents/{owner.agent.agent_id}"
        page = viewer.browser.get(path)
        assert page.status_code == 200
        assert (
            "You are a viewer: you may see this agent, but only an owner or an admin can change it"
            in _text(page)
        )
        assert page.text.count("<fieldset disabled>") == 5  # the policy's four, the token's (and within)
        assert re.search(r'<button type="submit" class="button" disabled>Save the policy</button>', page.text)
        assert re.search(r'class="button danger" disabled>Disable ', page.text)
        before = _policy(sqlite_db, owner.agent.agent_id)
        csrf = csrf_of(page.text)
        posts: dict[str, dict[str, str | list[str]]] = {
            "policy": _policy_form(before, daily_cap_usd="1.00"),
            "tokens": {"scopes": ["payments:read"], "ttl_days": "30"},
            "disable": {},
            "enable": {},
            f"tokens/{_tokens(sqlite_db, owner.agent.agent_id)[0].id}/revoke": {},
        }
        for action, form in posts.items():
            refused = viewer.browser.http.post(f"{path}/{action}", data={**form, "csrf": csrf})
            assert refused.status_code == 403, action
            assert "Your role cannot change agents" in _text(refused)
            assert "You are a viewer of this organisation" in _text(refused)
        assert _policy(sqlite_db, owner.agent.agent_id) == before
        assert len(_tokens(sqlite_db, owner.agent.agent_id)) == 1
        with sqlite_db.read() as session:
            assert session.get(Agent, owner.agent.agent_id).disabled_at is None  # type: ignore[union-attr]
    finally:
        viewer.browser.close()


@pytest.mark.parametrize("action", ["policy", "tokens", "disable", "enable", "revoke"])
def test_a_form_without_its_csrf_token_is_refused(
    server: RunningServer, owner: Person, sqlite_db: Database, action: str
) -> None:
    path, _ = _page(owner)
    tokens = _tokens(sqlite_db, owner.agent.agent_id)
    if action == "revoke":
        action = f"tokens/{tokens[0].id}/revoke"
    before = _policy(sqlite_db, owner.agent.agent_id)
    form = _policy_form(before, daily_cap_usd="1.00") if action == "policy" else {"scopes": ["payments:read"]}
    refused = owner.browser.http.post(f"{path}/{action}", data={**form, "csrf": "forged"})
    assert refused.status_code == 403
    missing = owner.browser.http.post(f"{path}/{action}", data=form)
    assert missing.status_code == 403
    assert _policy(sqlite_db, owner.agent.agent_id) == before
    assert [row.id for row in _tokens(sqlite_db, owner.agent.agent_id)] == [row.id for row in tokens]
    with sqlite_db.read() as session:
        assert session.get(Agent, owner.agent.agent_id).disabled_at is None  # type: ignore[union-attr]


def _nonce_of(page: str) -> str:
    found = re.search(r'name="nonce" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def _tokens(db: Database, agent_id: str) -> list[AccessToken]:
    with db.read() as session:
        return list(
            session.exec(
                select(AccessToken).where(AccessToken.agent_id == agent_id, AccessToken.revoked_at.is_(None))  # type: ignore[union-attr]
            )
        )


def test_issuing_a_token_needs_sudo_then_shows_it_once_and_revoking_asks_first(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    path, page = _page(owner)
    form = {
        "csrf": csrf_of(page.text),
        "nonce": _nonce_of(page.text),
        "label": "ci runner",
        "scopes": ["payments:read"],
        "ttl_days": "7",
    }
    before = _tokens(sqlite_db, owner.agent.agent_id)
    moved = owner.browser.http.post(f"{path}/tokens", data=form)
    assert moved.status_code == 303
    assert moved.headers["location"] == f"/account/sudo?next=%2Fadmin%2Fagents%2F{owner.agent.agent_id}"
    assert len(_tokens(sqlite_db, owner.agent.agent_id)) == len(before)

    bad = owner.browser.http.post(f"{path}/tokens", data={**form, "scopes": ["admin:write"], "ttl_days": "8"})
    assert bad.status_code == 400
    assert "Choose at least one of the permissions listed." in _text(bad)
    assert "Choose one of the lifetimes listed." in _text(bad)
    assert "No token was issued: correct the choices marked below." in _text(bad)

    owner.browser.sudo()
    issued = owner.browser.http.post(f"{path}/tokens", data=form)
    assert issued.status_code == 200
    assert issued.headers["cache-control"].startswith("no-store")
    token = re.search(r'<p class="code full" id="issued-token">(pw_at_[^<]+)</p>', issued.text)
    assert token is not None
    assert "it is shown this once and cannot be shown again" in _text(issued)
    again = owner.browser.get(path)
    assert token.group(1) not in again.text
    assert '<h3 class="card-title">ci runner</h3>' in again.text
    new = [row for row in _tokens(sqlite_db, owner.agent.agent_id) if row.label == "ci runner"]
    assert len(new) == 1
    assert new[0].scopes == "payments:read"
    assert (new[0].expires_at - new[0].created_at).days == 7

    # Revoking asks once, on a page of its own; its button posts the revocation.
    confirm = owner.browser.get(f"{path}/tokens/{new[0].id}/revoke")
    assert confirm.status_code == 200
    assert "Revoke this token?" in _text(confirm)
    assert len(_tokens(sqlite_db, owner.agent.agent_id)) == len(before) + 1
    done = owner.browser.http.post(f"{path}/tokens/{new[0].id}/revoke", data={"csrf": csrf_of(confirm.text)})
    assert done.headers["location"] == f"{path}?done=revoked#tokens"
    assert "The token was revoked: it no longer works." in _text(owner.browser.get(f"{path}?done=revoked"))
    assert [row.id for row in _tokens(sqlite_db, owner.agent.agent_id) if row.label == "ci runner"] == []
    gone = owner.browser.http.post(f"{path}/tokens/{new[0].id}/revoke", data={"csrf": csrf_of(confirm.text)})
    assert gone.status_code == 404


def test_a_token_form_posted_again_issues_nothing_and_says_it_was_shown(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    """Reloading the page that shows a new token posts its form again: the form's one-time nonce
    was used, so nothing new is issued and the page says the token was shown already."""
    path, page = _page(owner)
    nonce = re.search(r'<input type="hidden" name="nonce" value="([A-Za-z0-9_-]{22})">', page.text)
    assert nonce is not None
    owner.browser.sudo()
    form = {"csrf": csrf_of(page.text), "nonce": nonce.group(1), "label": "once", "scopes": ["payments:read"]}
    first = owner.browser.http.post(f"{path}/tokens", data=form)
    assert first.status_code == 200
    secret = re.search(r'id="issued-token">(pw_at_[^<]+)<', first.text)
    assert secret is not None
    # The page that showed it carries a new nonce for issuing another.
    assert f'value="{nonce.group(1)}"' not in first.text
    again = owner.browser.http.post(f"{path}/tokens", data=form)
    assert again.status_code == 409
    assert 'id="issued-token"' not in again.text
    assert secret.group(1) not in again.text
    assert "This token was already issued and shown once" in _text(again)
    assert [row.label for row in _tokens(sqlite_db, owner.agent.agent_id)].count("once") == 1
    # A form without a nonce, or with one not made by the page, issues nothing either.
    without = {name: value for name, value in form.items() if name != "nonce"}
    for bad in ({}, {"nonce": "x"}, {"nonce": "a" * 200}):
        refused = owner.browser.http.post(f"{path}/tokens", data={**without, **bad, "label": "never"})
        assert refused.status_code == 400
        assert "No token was issued: this form is out of date. Reload the page and try again." in _text(
            refused
        )
    assert "never" not in [row.label for row in _tokens(sqlite_db, owner.agent.agent_id)]


def test_disabling_applies_at_once_and_enabling_gives_it_back(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    path, page = _page(owner)
    done = owner.browser.http.post(f"{path}/disable", data={"csrf": csrf_of(page.text)})
    assert done.headers["location"] == f"{path}?done=disabled"
    with sqlite_db.read() as session:
        disabled_at: datetime | None = session.get(Agent, owner.agent.agent_id).disabled_at  # type: ignore[union-attr]
    assert disabled_at is not None
    shown = _text(owner.browser.get(f"{path}?done=disabled"))
    assert "The agent is disabled: its tokens and connections are refused from now on." in shown
    assert "Enable " in shown
    done = owner.browser.http.post(f"{path}/enable", data={"csrf": csrf_of(page.text)})
    assert done.headers["location"] == f"{path}?done=enabled"
    with sqlite_db.read() as session:
        assert session.get(Agent, owner.agent.agent_id).disabled_at is None  # type: ignore[union-attr]


def test_another_organisations_agent_is_not_found(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    other = enrolled_person(server, sqlite_db)
    try:
        page = owner.browser.get(f"/admin/agents/{other.agent.agent_id}")
        assert page.status_code == 404
        csrf = csrf_of(owner.browser.get("/admin").text)
        refused = owner.browser.http.post(
            f"/admin/agents/{other.agent.agent_id}/disable", data={"csrf": csrf}
        )
        assert refused.status_code == 404
        with sqlite_db.read() as session:
            assert session.get(Agent, other.agent.agent_id).disabled_at is None  # type: ignore[union-attr]
        assert owner.browser.get(f"/admin/agents/agt_{secrets.token_hex(4)}").status_code == 404
    finally:
        other.browser.close()


def test_a_viewer_reads_the_overview_without_an_inbox_link(
    server: RunningServer, owner: Person, sqlite_db: Database
) -> None:
    viewer = enrolled_person(server, sqlite_db, role=Role.VIEWER, org_id=owner.agent.org_id)
    try:
        page = viewer.browser.get("/admin")
        assert page.status_code == 200
        text = _text(page)
        assert "$0.00 of its $10.00 daily cap (0%)" in text
        assert "approvals wait" not in text
        assert f'href="/admin/agents/{owner.agent.agent_id}"' in page.text
    finally:
        viewer.browser.close()
