"""fetch_paid against a hostile seller, end to end: a real MCP client, a running Paywarden, a real
seller on loopback that misbehaves, real authorisations on anvil.

For every scenario: the exact error code (or result), how many signed payments the seller received
(never more than one), the intent's final state, the counted spend, and that the seller's words
(marked CANARY) reach the agent only inside the fenced, untrusted block.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from mcp import Client
from mcp_types import CallToolResult
from sqlmodel import col, select

from server.chain.service import ChainService
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent
from server.payments.settlement.reconciler import SettlementReconciler
from server.policy.service import PolicyChanges
from server.vocabulary import IntentStatus
from tests.support.chain import Anvil, TestToken, free_port, fresh_wallet
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import (  # noqa: F401 (pytest finds fixtures by their registered names)
    CANARY,
    FAKE_TX,
    HUGE_BYTES,
    INJECTION,
    PRICE,
    HostileSeller,
    fixture_hostile_seller,
)
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.tenants import AgentSetup, change_policy, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

MAX_BODY = 65_536


def terms_of(offer: dict[str, Any]) -> str:
    """The SHA-256 of an accepts entry as canonical JSON (sorted keys, no spaces)."""
    return hashlib.sha256(json.dumps(offer, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


FETCH_TIMEOUT_MS = 3000


# SQL is not what these tests are about: they share one SQLite database and one server per module,
# and each test keeps to its own organisation and agent (docs/development.md, "Sharing a server").
@pytest.fixture(name="db")
def fixture_db(module_sqlite_db: Database) -> Database:
    return module_sqlite_db


@pytest.fixture(scope="module")
def paywarden(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, hostile_seller: HostileSeller
) -> Iterator[RunningServer]:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_FETCH_TIMEOUT_MS": str(FETCH_TIMEOUT_MS),
        "PAYWARDEN_MAX_RESPONSE_BYTES": str(MAX_BODY),
    }
    # Not about the first-payment hold for a new payee: the catalog pins the seller's payee.
    pin_payee(module_sqlite_db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    with serve(module_sqlite_db.url, extra=extra) as server:
        yield server


@pytest.fixture
def agent(
    paywarden: RunningServer, db: Database, funded_wallet: FundedWallet, hostile_seller: HostileSeller
) -> AgentSetup:
    return make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        daily_cap="5.00",
    )


@pytest.fixture
async def client(paywarden: RunningServer, agent: AgentSetup) -> AsyncIterator[Client]:
    async with mcp_client(paywarden.mcp_url, agent.token) as connected:
        yield connected


# -- helpers ------------------------------------------------------------------------------------


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content]  # type: ignore[union-attr]


def assert_fenced_only(result: CallToolResult) -> None:
    """The seller's words appear, if at all, only inside a fenced block, never in our metadata."""
    blocks = texts(result)
    assert CANARY not in blocks[0]
    assert CANARY not in json.dumps(result.structured_content)
    for block in blocks[1:]:
        if CANARY in block:
            assert block.startswith("UNTRUSTED THIRD-PARTY CONTENT")
            inside = block.split("<<<BEGIN-UNTRUSTED ", 1)[1].rsplit("<<<END-UNTRUSTED ", 1)[0]
            assert CANARY in inside


async def budget_spent(client: Client) -> str:
    return str(structured(await client.call_tool("get_budget", {}))["spentTodayUsd"])


def intent(db: Database, intent_id: str) -> PaymentIntent:
    with db.read() as session:
        row = session.get(PaymentIntent, intent_id)
        assert row is not None
        return row


def intents_of(db: Database, agent: AgentSetup) -> list[PaymentIntent]:
    with db.read() as session:
        return list(session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent.agent_id)))


def events(db: Database, agent: AgentSetup, kind: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(
            session.exec(
                select(AuditEvent)
                .where(AuditEvent.org_id == agent.org_id, AuditEvent.type == kind)
                .order_by(col(AuditEvent.seq))
            )
        )


async def fetch(client: Client, url: str, **arguments: Any) -> CallToolResult:
    return await client.call_tool("fetch_paid", {"url": url, **arguments})


async def reconcile(db: Database, chain: ChainService) -> int:
    return await SettlementReconciler(db=db, chain=chain, clock=SystemClock()).run_once()


def assert_nothing_paid(db: Database, agent: AgentSetup, hostile: HostileSeller, path: str) -> None:
    assert hostile.signatures(path) == 0
    assert intents_of(db, agent) == []


# -- after paying --------------------------------------------------------------------------------


async def test_connection_dropped_after_the_signature_is_outcome_unknown(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("drop")
    result = await fetch(client, hostile_seller.url(path))
    error = error_of(result)
    assert error["code"] == "payment_outcome_unknown"
    assert hostile_seller.signatures(path) == 1
    assert intent(db, error["intentId"]).status == "submitted"
    assert await budget_spent(client) == "0.01"

    # The retry the error invites answers from the ledger and signs nothing new.
    retry = error_of(await fetch(client, hostile_seller.url(path), idempotencyKey=error["idempotencyKey"]))
    assert retry["code"] == "payment_in_progress"
    assert retry["intentId"] == error["intentId"]
    assert hostile_seller.signatures(path) == 1


async def test_a_500_after_paying_is_not_completed_and_never_retried(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("error500")
    result = await fetch(client, hostile_seller.url(path))
    error = error_of(result)
    assert error["code"] == "payment_not_completed"
    assert error["httpStatus"] == 500
    assert error["sellerReason"] == {"untrusted": True}
    assert error["receipt"] == {"state": "failed", "txHash": None}
    assert "redirectNotFollowed" not in error
    assert_fenced_only(result)
    assert any(CANARY in block for block in texts(result)[1:])  # the reason is there, fenced
    assert hostile_seller.signatures(path) == 1
    row = intent(db, error["intentId"])
    assert (row.status, row.failure_code, row.seller_status) == ("failed", "payment_not_completed", 500)
    # A failed payment keeps counting until the chain proves it can no longer settle.
    assert await budget_spent(client) == "0.01"

    retry = error_of(await fetch(client, hostile_seller.url(path), idempotencyKey=error["idempotencyKey"]))
    assert retry["code"] == "intent_not_replayable"
    assert hostile_seller.signatures(path) == 1


async def test_a_seller_that_settles_then_answers_500_is_settled_from_the_chain(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, chain: ChainService
) -> None:
    path = hostile_seller.path("settle-then-500")
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "payment_not_completed"
    assert hostile_seller.signatures(path) == 1

    await reconcile(db, chain)
    row = intent(db, error["intentId"])
    assert row.status == "settled"
    assert row.tx_hash is not None
    assert events(db, agent, "payment.settled")[-1].subject_id == row.id

    # Asking again with the key now answers "paid" from the ledger; nothing is signed.
    replay = structured(await fetch(client, hostile_seller.url(path), idempotencyKey=error["idempotencyKey"]))
    assert replay["status"] == "paid"
    assert replay["replayed"] is True
    assert replay["receipt"] == {"state": "settled", "txHash": row.tx_hash}
    assert hostile_seller.signatures(path) == 1
    assert await budget_spent(client) == "0.01"


async def test_a_redirect_after_paying_is_never_followed(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("redirect")
    result = await fetch(client, hostile_seller.url(path))
    error = error_of(result)
    assert error["code"] == "payment_not_completed"
    assert error["httpStatus"] == 302
    assert error["redirectNotFollowed"] is True
    assert_fenced_only(result)
    assert hostile_seller.signatures(path) == 1
    assert hostile_seller.requests("/target/" + path) == 0
    assert intent(db, error["intentId"]).status == "failed"
    assert await budget_spent(client) == "0.01"


async def test_another_402_after_paying_is_rejected_by_the_seller(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("again402")
    result = await fetch(client, hostile_seller.url(path))
    error = error_of(result)
    assert error["code"] == "payment_rejected_by_seller"
    assert error["httpStatus"] == 402
    assert error["sellerReason"] == {"untrusted": True}
    assert error["intentId"].startswith("pi_")
    assert error["idempotencyKey"]
    assert (error["amountUsd"], error["payTo"], error["mode"]) == (
        "0.01",
        hostile_seller.pay_to,
        "server_signed",
    )
    assert_fenced_only(result)
    assert any("seller's reason" in block and CANARY in block for block in texts(result)[1:])
    assert hostile_seller.signatures(path) == 1
    row = intent(db, error["intentId"])
    assert (row.status, row.failure_code) == ("failed", "payment_rejected_by_seller")
    assert row.seller_reason is not None  # kept for the record, shown only fenced
    assert events(db, agent, "payment.failed")[-1].subject_id == row.id
    assert await budget_spent(client) == "0.01"


async def test_a_settlement_reported_failed_is_rejected_by_the_seller(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("settle-failed")
    result = await fetch(client, hostile_seller.url(path))
    error = error_of(result)
    assert error["code"] == "payment_rejected_by_seller"
    assert error["httpStatus"] == 200
    assert_fenced_only(result)
    assert hostile_seller.signatures(path) == 1
    row = intent(db, error["intentId"])
    assert row.status == "failed"
    # Failed after sending, the payment still keeps what came back: the body's digest (never the
    # body), its size and type, the settlement header as received, and the terms it paid.
    served = json.dumps({"data": INJECTION}).encode()
    assert (row.body_sha256, row.body_bytes, row.body_truncated) == (
        hashlib.sha256(served).hexdigest(),
        len(served),
        False,
    )
    assert row.content_type == "application/json"
    assert row.payment_response == HostileSeller.receipt(success=False, transaction="", error=INJECTION)
    assert row.terms_sha256 == terms_of(hostile_seller.offer())
    # The body is nowhere in the row (the seller's reason, from its receipt, is kept as before).
    assert not any(isinstance(v, str) and '{"data"' in v for v in row.model_dump().values())
    # The agent sees the header only in its base64 form, where the seller's words are not text.
    (listed,) = structured(await client.call_tool("list_payments", {"limit": 1}))["payments"]
    assert listed["intentId"] == row.id
    assert listed["paymentResponse"] == row.payment_response
    assert listed["bodySha256"] == row.body_sha256


async def test_a_50_mb_body_is_cut_at_the_cap(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("huge")
    paid = structured(await fetch(client, hostile_seller.url(path)))
    assert paid["status"] == "paid"
    assert paid["body"]["truncated"] is True
    assert paid["body"]["bytes"] == MAX_BODY
    assert paid["body"]["encoding"] == "base64"  # binary content type
    assert paid["receipt"]["state"] == "settled"
    assert "bodyError" not in paid
    assert hostile_seller.signatures(path) == 1
    assert hostile_seller.streamed[path] < HUGE_BYTES
    row = intent(db, paid["intentId"])
    assert row.status == "settled"
    # The receipt hashes the bytes as received, and says they are not the whole body.
    received = (b"\x00\x01" * 32768)[:MAX_BODY]
    assert (row.body_sha256, row.body_bytes, row.body_truncated) == (
        hashlib.sha256(received).hexdigest(),
        MAX_BODY,
        True,
    )
    assert row.content_type == "application/octet-stream"
    assert await budget_spent(client) == "0.01"


async def test_a_seller_stalling_before_the_challenge_times_out_and_nothing_is_paid(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("stall402")
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "seller_timeout"
    assert_nothing_paid(db, agent, hostile_seller, path)
    assert await budget_spent(client) == "0.00"


async def test_no_payment_is_signed_when_the_deadline_is_nearly_spent(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("slow402")  # the challenge comes 2.5 s into a 3 s exchange
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "seller_timeout"
    assert_nothing_paid(db, agent, hostile_seller, path)


async def test_a_seller_stalling_after_paying_is_outcome_unknown_until_the_chain_says(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, chain: ChainService
) -> None:
    path = hostile_seller.path("stall-head")
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "payment_outcome_unknown"
    assert hostile_seller.signatures(path) == 1
    assert intent(db, error["intentId"]).status == "submitted"
    await reconcile(db, chain)
    assert intent(db, error["intentId"]).status == "settled"


async def test_a_body_stalling_after_the_head_is_paid_with_a_body_error(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("stall-body")
    result = await fetch(client, hostile_seller.url(path))
    paid = structured(result)
    assert paid["status"] == "paid"
    assert paid["bodyError"]
    assert paid["body"]["truncated"] is True
    assert 0 < paid["body"]["bytes"] < 1000
    assert paid["receipt"]["state"] == "settled"
    assert hostile_seller.signatures(path) == 1
    assert_fenced_only(result)


async def test_a_body_cut_short_is_paid_with_a_body_error(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("partial-body")
    paid = structured(await fetch(client, hostile_seller.url(path)))
    assert paid["status"] == "paid"
    assert paid["bodyError"]
    assert paid["body"]["bytes"] == len(b"only this")
    assert hostile_seller.signatures(path) == 1


async def test_a_lie_in_payment_response_is_not_settled_until_the_chain_shows_it(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, chain: ChainService
) -> None:
    path = hostile_seller.path("lie")
    paid = structured(await fetch(client, hostile_seller.url(path)))
    assert paid["status"] == "paid"  # served, and the seller did not report a failure
    assert paid["receipt"] == {"state": "pending", "txHash": None}  # the claimed hash is not repeated
    row = intent(db, paid["intentId"])
    assert (row.status, row.seller_tx_hash, row.tx_hash) == ("settlement_pending", FAKE_TX, None)

    await reconcile(db, chain)
    assert intent(db, paid["intentId"]).status == "settlement_pending"

    # The seller settles late; only now, from the logs, is the payment settled.
    settled = hostile_seller.settle_captured(path)
    await reconcile(db, chain)
    row = intent(db, paid["intentId"])
    assert row.status == "settled"
    assert row.tx_hash == settled.transaction
    assert row.tx_hash != FAKE_TX
    assert hostile_seller.signatures(path) == 1


async def test_a_false_transaction_hash_is_replaced_by_the_one_on_chain(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("lie-hash")
    paid = structured(await fetch(client, hostile_seller.url(path)))
    assert paid["receipt"]["state"] == "settled"
    assert paid["receipt"]["txHash"] not in (None, FAKE_TX)
    assert intent(db, paid["intentId"]).seller_tx_hash == FAKE_TX


# -- before paying ---------------------------------------------------------------------------


async def test_a_challenge_for_another_host_is_refused(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("other-host")
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "resource_mismatch"
    assert_nothing_paid(db, agent, hostile_seller, path)


async def test_a_payee_other_than_the_pinned_one_is_never_paid_unasked(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    # The catalog pins hostile_seller.pay_to for this host; this path asks for another payee.
    path = hostile_seller.path("payee")
    held = structured(await fetch(client, hostile_seller.url(path)))
    assert (held["status"], held["reason"]) == ("pending_approval", "new_pay_to")
    assert held["payTo"] == hostile_seller.other_pay_to
    assert hostile_seller.signatures(path) == 0

    change_policy(db, agent.agent_id, PolicyChanges(verified_sellers_only=True))
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "policy_denied"
    assert error["reasons"] == ["pay_to_not_verified"]
    assert hostile_seller.signatures(path) == 0
    assert all(intent.authorized_at is None for intent in intents_of(db, agent))


async def test_a_denied_payee_is_never_paid(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    change_policy(db, agent.agent_id, PolicyChanges(pay_to_deny=(hostile_seller.other_pay_to,)))
    path = hostile_seller.path("payee")
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "policy_denied"
    assert error["reasons"] == ["pay_to_denied"]
    assert_nothing_paid(db, agent, hostile_seller, path)


async def test_instructions_in_the_challenge_hold_the_payment(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("inject")
    result = await fetch(client, hostile_seller.url(path))
    pending = structured(result)
    assert pending["status"] == "pending_approval"
    assert pending["reason"] == "instruction_like_description"
    assert pending["thresholdUsd"] is None
    assert_fenced_only(result)
    assert all(CANARY not in block for block in texts(result))
    # Held for a person: nothing signed, and the intent waits unauthorised, counting nothing.
    assert hostile_seller.signatures(path) == 0
    [intent] = intents_of(db, agent)
    assert (intent.status, intent.tx_hash, intent.authorized_at) == ("created", None, None)
    [held] = events(db, agent, "payment.held")
    assert held.data["holdReason"] == "instruction_like_description"
    assert held.data["outcome"] == "hold"


async def test_instructions_in_a_free_body_stay_fenced(
    client: Client, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    result = await fetch(client, hostile_seller.url(hostile_seller.path("free")))
    assert structured(result)["status"] == "ok"
    assert_fenced_only(result)
    assert any(CANARY in block for block in texts(result)[1:])


@pytest.mark.parametrize("body", ['{"q": "x", "n": [1, 2]}', "[1,  2]", "null", "true", "plain text"])
async def test_a_text_body_reaches_the_seller_as_written(
    client: Client, agent: AgentSetup, hostile_seller: HostileSeller, body: str
) -> None:
    """A body that reads as JSON is still the agent's text: not parsed, re-encoded or refused."""
    result = await fetch(
        client,
        hostile_seller.url(hostile_seller.path("echo")),
        method="POST",
        headers={"Content-Type": "application/json"},
        body=body,
    )
    document = structured(result)
    assert document["status"] == "ok"
    assert document["body"]["encoding"] == "base64"
    echoed = texts(result)[1]
    assert base64.b64encode(body.encode()).decode() in echoed


async def test_a_body_that_is_not_text_is_refused_with_a_stable_code(
    client: Client, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("echo")
    for body in ({"q": 1}, [1, 2], 5):
        error = error_of(await fetch(client, hostile_seller.url(path), method="POST", body=body))
        assert (error["code"], error["reason"]) == ("invalid_input", "invalid_body")
    assert hostile_seller.requests(path) == 0


async def test_instructions_in_a_paid_body_stay_fenced(
    client: Client, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("paid-inject")
    result = await fetch(client, hostile_seller.url(path))
    assert structured(result)["status"] == "paid"
    assert_fenced_only(result)
    assert any(CANARY in block for block in texts(result)[1:])
    assert hostile_seller.signatures(path) == 1


async def test_a_402_without_a_challenge(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("no-challenge")
    result = await fetch(client, hostile_seller.url(path))
    assert error_of(result)["code"] == "invalid_payment_required"
    assert_fenced_only(result)
    assert_nothing_paid(db, agent, hostile_seller, path)


@pytest.mark.parametrize(
    ("scenario", "reason"), [("unpayable", "unsupported_network"), ("wrong-asset", "unsupported_asset")]
)
async def test_no_payable_entry_says_why(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, scenario: str, reason: str
) -> None:
    path = hostile_seller.path(scenario)
    error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "no_payable_entry"
    assert error["reason"] == reason
    assert_nothing_paid(db, agent, hostile_seller, path)


async def test_an_unreachable_seller(client: Client, db: Database, agent: AgentSetup) -> None:
    error = error_of(await fetch(client, f"http://127.0.0.1:{free_port()}/premium"))
    assert error["code"] == "seller_unreachable"
    assert intents_of(db, agent) == []


async def test_x402_v1_is_paid_the_same_way_under_the_same_policy(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, test_usdc: TestToken
) -> None:
    path = hostile_seller.path("v1")
    seller_before = test_usdc.balance_of(hostile_seller.pay_to)
    paid = structured(await fetch(client, hostile_seller.url(path), maxAmountUsd="0.05"))
    assert paid["status"] == "paid"
    assert (paid["amountUsd"], paid["network"]) == ("0.01", "eip155:84532")
    assert paid["receipt"]["state"] == "settled"
    assert hostile_seller.signatures(path) == 1
    assert test_usdc.balance_of(hostile_seller.pay_to) == seller_before + PRICE
    assert intent(db, paid["intentId"]).x402_version == 1

    error = error_of(await fetch(client, hostile_seller.url(hostile_seller.path("v1")), maxAmountUsd="0.001"))
    assert error["code"] == "amount_exceeds_max"
    change_policy(db, agent.agent_id, PolicyChanges(pay_to_deny=(hostile_seller.pay_to,)))
    denied_path = hostile_seller.path("v1")
    error = error_of(await fetch(client, hostile_seller.url(denied_path)))
    assert (error["code"], error["reasons"]) == ("policy_denied", ["pay_to_denied"])
    assert hostile_seller.signatures(denied_path) == 0


async def test_a_same_origin_redirect_before_the_challenge_is_followed(
    client: Client, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    path = hostile_seller.path("hop")
    paid = structured(await fetch(client, hostile_seller.url(path)))
    assert paid["status"] == "paid"
    honest = "/honest/" + path.rsplit("/", 1)[-1]
    assert hostile_seller.signatures(honest) == 1  # paid where the challenge came from
    assert hostile_seller.signatures(path) == 0


async def test_a_key_for_another_request_is_refused(
    client: Client, agent: AgentSetup, hostile_seller: HostileSeller
) -> None:
    paid = structured(await fetch(client, hostile_seller.url(hostile_seller.path("honest"))))
    other = hostile_seller.path("honest")
    error = error_of(await fetch(client, hostile_seller.url(other), idempotencyKey=paid["idempotencyKey"]))
    assert error["code"] == "idempotency_key_reused"
    assert hostile_seller.signatures(other) == 0


async def test_a_wallet_without_funds_is_refused_before_signing(
    paywarden: RunningServer, db: Database, hostile_seller: HostileSeller
) -> None:
    _, empty_key = fresh_wallet()  # the module's server already pins the seller's payee
    setup = make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=empty_key)
    path = hostile_seller.path("honest")
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "insufficient_funds"
    address = error["payer"]
    assert (error["network"], error["networkName"]) == ("eip155:84532", "Base Sepolia")
    assert (error["balanceUsdc"], error["amountUsdc"]) == ("0.00", "0.01")
    assert error["summary"] == (
        f"Wallet {address[:6]}…{address[-4:]} holds 0.00 USDC on Base Sepolia, and this payment needs "
        "0.01 USDC. Nothing was signed or paid."
    )
    assert_nothing_paid(db, setup, hostile_seller, path)


async def test_private_addresses_are_blocked_without_the_development_switch(
    sqlite_db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    hostile_seller: HostileSeller,
    funded_wallet: FundedWallet,
) -> None:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_ALLOW_PRIVATE_HOSTS": "0",
    }
    port = hostile_seller.server.port
    with serve(sqlite_db.url, extra=extra) as server:
        setup = make_agent(
            sqlite_db,
            server.settings,
            allow_hosts=["localhost", "127.0.0.1", "0x7f.1", "2130706433"],
            wallet_key=funded_wallet.private_key,
        )
        async with mcp_client(server.mcp_url, setup.token) as client:
            for host in ("localhost", "127.0.0.1", "0x7f.1", "2130706433"):
                path = hostile_seller.path("honest")
                error = error_of(await fetch(client, f"https://{host}:{port}{path}"))
                assert error["code"] == "private_address_blocked", host
                assert hostile_seller.requests(path) == 0
            path = hostile_seller.path("honest")
            error = error_of(await fetch(client, f"http://127.0.0.1:{port}{path}"))
            assert (error["code"], error["reason"]) == ("invalid_input", "https_required")
            assert hostile_seller.requests(path) == 0
    assert intents_of(sqlite_db, setup) == []


async def test_control_plane_unavailable_sends_nothing(
    sqlite_db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    hostile_seller: HostileSeller,
    funded_wallet: FundedWallet,
) -> None:
    with serve(
        sqlite_db.url, extra=chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    ) as server:
        setup = make_agent(
            sqlite_db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        )
        # The policy store breaks underneath the running server.
        with sqlite_db.engine.begin() as connection:
            connection.exec_driver_sql("ALTER TABLE policy_versions RENAME TO policy_versions_gone")
        path = hostile_seller.path("honest")
        async with mcp_client(server.mcp_url, setup.token) as client:
            error = error_of(await fetch(client, hostile_seller.url(path)))
    assert error["code"] == "control_plane_unavailable"
    assert hostile_seller.requests(path) == 0


async def test_a_receipt_that_cannot_be_recorded_is_reported_unknown(
    client: Client,
    db: Database,
    agent: AgentSetup,
    hostile_seller: HostileSeller,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sqlalchemy.exc import OperationalError

    from server.payments.purchase import PurchaseService

    update = PurchaseService._update

    def failing_update(
        self: PurchaseService, principal: Any, intent_id: str, to: IntentStatus, event: str, **fields: Any
    ) -> Any:
        if to == IntentStatus.SETTLEMENT_PENDING:
            raise OperationalError("UPDATE payment_intents", {}, Exception("database went away"))
        return update(self, principal, intent_id, to, event, **fields)

    monkeypatch.setattr(PurchaseService, "_update", failing_update)
    path = hostile_seller.path("honest")
    paid = structured(await fetch(client, hostile_seller.url(path)))
    # The seller served and the payment happened; only our record of the receipt is missing.
    assert paid["status"] == "paid"
    assert paid["receipt"]["state"] == "unknown"
    assert hostile_seller.signatures(path) == 1
    assert intent(db, paid["intentId"]).status == "submitted"


@pytest.mark.parametrize("scenario", ["redirect-away", "downgrade"])
async def test_a_redirect_elsewhere_before_paying_is_returned_as_it_is(
    client: Client, db: Database, agent: AgentSetup, hostile_seller: HostileSeller, scenario: str
) -> None:
    path = hostile_seller.path(scenario)
    result = structured(await fetch(client, hostile_seller.url(path)))
    assert result["status"] == "ok"
    assert result["httpStatus"] == 302
    assert result["redirectNotFollowed"] is True
    assert hostile_seller.requests(path) == 1
    assert intents_of(db, agent) == []
