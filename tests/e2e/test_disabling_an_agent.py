"""Disabling an agent means now, end to end against a real server, the local x402 seller and anvil:

- a `fetch_paid` waiting for a person (URL elicitation accepted, protocol 2025-11-25) ends as soon
  as the agent is disabled from another process, with `agent_disabled`, not at its wait's end;
  its approval is denied with the reason `agent_disabled`, and the agent's next call is refused;
- a payment approved but not yet used can no longer pay, even once the agent is enabled again;
- two `paywarden serve` processes on one database: an owner disables the agent on one, and the
  other refuses its command-line token, its OAuth access token and its OAuth refresh token.

Nothing reaches the seller's payment check in any of them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlmodel import select

from server.kit.clock import SystemClock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.models import Approval, AuditEvent, PaymentIntent, Wallet
from server.payments import decisions
from server.signers.base import Signer
from server.wallets.service import signer_for
from tests.e2e.test_approvals import Money
from tests.support.chain import Anvil, TestToken
from tests.support.cli import PAYWARDEN, command_environ, run_cli
from tests.support.elicitation import (
    LEGACY,
    UrlElicitations,
    approval_id_of,
    call_while_deciding,
    eliciting_client,
)
from tests.support.fixtures_chain import FundedWallet
from tests.support.oauth import call_tool, connect, enrolled_person, refresh_with
from tests.support.org_pages import post_form
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.principals import OPERATOR
from tests.support.processes import serve_processes
from tests.support.seller import Seller
from tests.support.tenants import make_agent, make_member, pin_payee

pytestmark = [pytest.mark.anyio]

TEST_TIMEOUT_S = 90
WAIT_MS = 30_000  # the call's own limit: ending near it would mean disabling did not end it
POLL_MS = 200


def _events(db: Database, org_id: str, type_: str) -> list[AuditEvent]:
    with db.read() as session:
        rows = session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id, AuditEvent.type == type_))
        return list(rows)


def _approval_and_intent(db: Database, approval_id: str) -> tuple[Approval, PaymentIntent]:
    with db.read() as session:
        approval = session.get(Approval, approval_id)
        assert approval is not None
        intent = session.get(PaymentIntent, approval.intent_id)
        assert intent is not None
        return approval, intent


@pytest.fixture
def paywarden(sqlite_db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": str(WAIT_MS),
        "PAYWARDEN_APPROVAL_POLL_MS": str(POLL_MS),
    }
    with serve(sqlite_db.url, extra=extra) as running:
        yield running


async def _disable_elsewhere(database_url: str, agent_id: str) -> None:
    """`paywarden admin agent disable`, in a process of its own."""
    done = await anyio.run_process(
        [PAYWARDEN, "admin", "agent", "disable", agent_id, "--json"],
        env=command_environ(database_url=database_url, env={}),
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


@pytest.mark.chain
async def test_a_waiting_call_ends_at_once_when_its_agent_is_disabled(
    paywarden: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    setup = make_agent(
        sqlite_db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    money = Money(test_usdc, seller, funded_wallet.address)
    elicitations = UrlElicitations("accept")
    disabled_at: list[float] = []

    async def disable(_: object) -> None:
        disabled_at.append(time.monotonic())
        await _disable_elsewhere(sqlite_db.url, setup.agent_id)

    with anyio.fail_after(TEST_TIMEOUT_S):
        async with eliciting_client(
            paywarden.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            result = await call_while_deciding(
                client, {"url": seller.url("/premium"), "maxAmountUsd": "1.00"}, elicitations, disable
            )
            ended = time.monotonic()
    error = error_of(result)
    assert error["code"] == "agent_disabled"
    assert error["message"] == "This agent is disabled, so nothing was paid."
    # Ended by the disabling (a few polls after the command), not by the call's own limit.
    assert ended - disabled_at[0] < WAIT_MS / 1000 / 2
    approval, intent = _approval_and_intent(sqlite_db, approval_id_of(elicitations.only()))
    assert approval.status == "denied"
    assert (intent.status, intent.failure_code) == ("failed", "agent_disabled")
    (denied,) = _events(sqlite_db, setup.org_id, "approval.denied")
    assert denied.data["reason"] == "agent_disabled"
    assert money.moved() == 0
    assert money.signatures("/premium") == 0

    # Its next call is refused at the door: the token's agent is disabled.
    refused = await anyio.to_thread.run_sync(call_tool, paywarden.mcp_url, setup.token, "get_budget")
    assert refused.status_code == 401
    assert "disabled" in refused.headers["www-authenticate"]


@pytest.mark.chain
async def test_an_approved_payment_not_yet_used_cannot_pay_after_disabling(
    paywarden: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    setup = make_agent(
        sqlite_db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    member = make_member(sqlite_db, setup.org_id, role="approver")
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with mcp_client(paywarden.mcp_url, setup.token) as client:
            held = structured(await client.call_tool("fetch_paid", {"url": url, "maxAmountUsd": "0.05"}))
        assert held["status"] == "pending_approval"
        approved = run_cli(
            sqlite_db.url,
            "admin",
            "approvals",
            "decide",
            held["approvalId"],
            "approve",
            "--member",
            member,
            "--json",
        ).json()
        assert approved["status"] == "approved"

        run_cli(sqlite_db.url, "admin", "agent", "disable", setup.agent_id, "--json").json()
        _, intent = _approval_and_intent(sqlite_db, held["approvalId"])
        assert (intent.status, intent.failure_code) == ("failed", "agent_disabled")
        # Enabled again, the agent can call, but what disabling ended stays ended.
        run_cli(sqlite_db.url, "admin", "agent", "enable", setup.agent_id, "--json").json()
        retry = {"url": url, "maxAmountUsd": "0.05", "idempotencyKey": held["idempotencyKey"]}
        async with mcp_client(paywarden.mcp_url, setup.token) as client:
            error = error_of(await client.call_tool("fetch_paid", retry))
            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]})
            )
    assert error["code"] == "agent_disabled"
    assert (status["status"], status["intentId"]) == ("denied", None)
    assert money.moved() == 0
    assert money.signatures("/premium") == 0


@pytest.mark.chain
async def test_a_payment_signed_before_disabling_is_not_sent_after_it(
    paywarden: RunningServer,
    sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent is disabled while its wallet signs (a key in memory signs before the payment is
    reserved): the reservation refuses it, the signed authorization never leaves the process, no
    payment is recorded, and the call ends with agent_disabled."""
    setup = make_agent(
        sqlite_db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)  # paid before: not held
    money = Money(test_usdc, seller, funded_wallet.address)

    def disabled_while_signing(wallet: Wallet, master: MasterKey, **signing: Any) -> Signer:
        with sqlite_db.write() as session:
            decisions.set_agent_disabled(
                session, OPERATOR, agent_id=setup.agent_id, disabled=True, now=SystemClock().now()
            )
        return signer_for(wallet, master, **signing)

    monkeypatch.setattr("server.payments.purchase.signer_for", disabled_while_signing)
    with anyio.fail_after(TEST_TIMEOUT_S):
        async with mcp_client(paywarden.mcp_url, setup.token) as client:
            error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
    assert error["code"] == "agent_disabled"
    with sqlite_db.read() as session:
        assert session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == setup.agent_id)).all() == []
    assert money.moved() == 0
    assert money.signatures("/premium") == 0


def test_another_process_refuses_the_agents_tokens_and_oauth_grants(
    sqlite_db: Database, tmp_path: Path
) -> None:
    """The owner disables the agent on the dashboard of one server; another server on the same
    database (and the same public URL, as behind a load balancer) refuses, on its next check, the
    agent's command-line token, the access token of its OAuth grant, and that grant's refresh."""
    extra = {"PAYWARDEN_BACKGROUND_JOBS": "0"}
    with serve(sqlite_db.url, public_host="localhost") as here:
        owner = enrolled_person(here, sqlite_db)
        with serve_processes(
            1, database_url=sqlite_db.url, extra=extra, workdir=tmp_path, public_url=here.settings.public_url
        ) as (_, (elsewhere,)):
            try:
                client, granted = connect(here, owner)
                tokens = (owner.agent.token, granted["access_token"])
                before = [call_tool(elsewhere.mcp_url, token, "get_budget") for token in tokens]
                page = f"/admin/agents/{owner.agent.agent_id}"
                done = post_form(owner, page, f"{page}/disable")
                assert done.headers["location"] == f"{page}?done=disabled"
                after = [call_tool(elsewhere.mcp_url, token, "get_budget") for token in tokens]
                renewed = refresh_with(
                    here, client["client_id"], granted["refresh_token"], base_url=elsewhere.base_url
                )
            finally:
                owner.browser.close()
    assert [answer.status_code for answer in before] == [200, 200]
    for answer in after:
        assert answer.status_code == 401, answer.text
        assert "The agent of this token is disabled." in answer.headers["www-authenticate"]
    assert renewed.status_code == 400, renewed.text
    assert renewed.json()["error"] == "invalid_grant"
