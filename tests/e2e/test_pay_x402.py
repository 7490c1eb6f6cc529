"""pay_x402 end to end: the agent's own HTTP client (here, the test's) gets a 402 from the x402 SDK's
seller on anvil, asks Paywarden for the payment header through the official MCP client, and sends
it. Paywarden requests the URL again and signs only for the terms the seller gives it, under the
same policy, caps, holds and approvals as fetch_paid; the payment settles from the chain alone,
and a seller's settlement header the agent reports is kept, never believed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from sqlmodel import col, select

from server.chain.service import ChainService
from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent
from server.payments.settlement.reconciler import SettlementReconciler
from tests.e2e.test_approvals import Money
from tests.support.chain import Anvil, TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.handover import challenge_of, pay_args, send
from tests.support.hostile_seller import HostileSeller, fixture_hostile_seller  # noqa: F401
from tests.support.oauth import SoftBrowser, csrf_of, enrollment_link_token
from tests.support.paywarden import RunningServer, chain_environ, error_of, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import AgentSetup, make_agent, make_member, pin_payee
from tests.support.x402_wire import PAYMENT_RESPONSE, decode_header, encode_header

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC
SELLER_TIMEOUT_S = 30  # a paid request settles on chain before the seller answers


@pytest.fixture(scope="module")
def server(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller
) -> Iterator[RunningServer]:
    """One server for the module's SQLite tests; each test makes its own organisation and agent.
    The catalog pins the seller's payee (these tests are not about the hold for a new payee)."""
    pin_payee(module_sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    with serve(module_sqlite_db.url, extra=extra) as running:
        yield running


def agent_for(server: RunningServer, db: Database, wallet: FundedWallet, **policy: Any) -> AgentSetup:
    return make_agent(db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=wallet.private_key, **policy)


def intents_of(db: Database, agent_id: str) -> list[PaymentIntent]:
    with db.read() as session:
        return list(session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent_id)))


def audit_types(db: Database, org_id: str) -> list[str]:
    with db.read() as session:
        rows = session.exec(
            select(AuditEvent.type).where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq))
        )
        return list(rows)


async def settle_from_the_chain(server: RunningServer, db: Database, anvil: Anvil) -> None:
    """One pass of the reconciler, as every server runs it in the background."""
    chain = ChainService({"eip155:84532": anvil.rpc_url})
    try:
        await SettlementReconciler(db=db, chain=chain, clock=server.clock).run_once()
    finally:
        await chain.aclose()


def counting(target: Any, name: str) -> list[int]:
    """Count calls of `target.name` (the server's own method, wrapped in place)."""
    calls: list[int] = []
    original: Callable[..., Awaitable[Any]] = getattr(target, name)

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return await original(*args, **kwargs)

    setattr(target, name, counted)
    return calls


async def test_the_header_handed_over_gets_the_paid_answer_and_settles_from_the_chain(
    paywarden: RunningServer,
    db: Database,
    anvil: Anvil,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    setup = agent_for(paywarden, db, funded_wallet, max_per_tx="0.10", daily_cap="1.00")
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    money = Money(test_usdc, seller, funded_wallet.address)
    signs = counting(paywarden.services.purchases, "sign")
    url = seller.url("/premium")
    required = challenge_of(seller, "/premium")

    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        signed = structured(await client.call_tool("pay_x402", pay_args(url, required, maxAmountUsd="0.05")))
        assert signed["status"] == "signed"
        assert (signed["headerName"], signed["x402Version"], signed["mode"]) == (
            "PAYMENT-SIGNATURE",
            2,
            "agent_sends",
        )
        assert (signed["amountUsd"], signed["network"], signed["payTo"]) == (
            "0.01",
            "eip155:84532",
            seller.pay_to,
        )
        assert signed["replayed"] is False
        assert signed["receipt"] == {"state": "pending", "txHash": None}
        assert signed["paymentIdentifier"] is None  # this seller does not declare the extension
        # Handed over, not sent: the seller has seen no payment yet, and nothing moved.
        assert (money.moved(), money.signatures("/premium")) == (0, 0)
        handed = decode_header(signed["headerValue"])
        assert handed["accepted"] == required["accepts"][0]  # the seller's own offer, echoed verbatim
        assert handed["payload"]["authorization"]["value"] == str(PREMIUM)
        [row] = structured(await client.call_tool("list_payments", {}))["payments"]
        assert (row["intentId"], row["status"], row["sentBy"]) == (signed["intentId"], "submitted", "agent")
        budget = structured(await client.call_tool("get_budget", {}))
        assert budget["spentTodayUsd"] == "0.01"  # counted from the moment it was authorised

        paid = send(url, signed)
        assert paid.status_code == 200, paid.text
        assert paid.json()["ok"] is True
        assert (money.moved(), money.signatures("/premium")) == (PREMIUM, 1)
        claimed_tx = decode_header(paid.headers[PAYMENT_RESPONSE])["transaction"]

        # Nobody told Paywarden anything: the reconciler finds the transfer by the authorisation's nonce.
        await settle_from_the_chain(paywarden, db, anvil)
        [row] = structured(await client.call_tool("list_payments", {}))["payments"]
        assert (row["status"], row["transactionHash"], row["paymentResponse"]) == (
            "settled",
            claimed_tx,
            None,
        )

        # The same key hands over the very same header, and signs nothing.
        replay = structured(
            await client.call_tool(
                "pay_x402",
                pay_args(url, required, maxAmountUsd="0.05", idempotencyKey=signed["idempotencyKey"]),
            )
        )
        assert (replay["replayed"], replay["intentId"], replay["headerValue"]) == (
            True,
            signed["intentId"],
            signed["headerValue"],
        )
        assert replay["receipt"] == {"state": "settled", "txHash": claimed_tx}
    assert len(signs) == 1
    assert money.moved() == PREMIUM
    [intent] = intents_of(db, setup.agent_id)
    assert intent.payment_header_sealed is not None
    assert signed["headerValue"].encode() not in bytes(
        intent.payment_header_sealed
    )  # sealed, not kept in clear
    types = audit_types(db, setup.org_id)
    assert [t for t in types if t.startswith("payment.")] == [
        "payment.authorized",
        "payment.submitted",
        "payment.settled",
    ]


async def test_a_copy_of_the_402_naming_other_terms_is_refused_and_nothing_is_signed(
    server: RunningServer,
    module_sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    db = module_sqlite_db
    setup = agent_for(server, db, funded_wallet)
    money = Money(test_usdc, seller, funded_wallet.address)
    signs = counting(server.services.purchases, "sign")
    url = seller.url("/premium")
    required = challenge_of(seller, "/premium")
    [offer] = required["accepts"]
    other_token = "0x" + "99" * 20
    variants: list[tuple[dict[str, Any], str]] = [
        ({"accepts": [{**offer, "amount": "1"}]}, "price"),
        ({"accepts": [{**offer, "payTo": "0x" + "ab" * 20}]}, "pay_to"),
        ({"accepts": [{**offer, "asset": other_token}]}, "asset"),
        ({"accepts": [{**offer, "network": "eip155:8453"}]}, "network"),
        ({"resource": {**required["resource"], "url": seller.url("/report")}}, "resource"),
        ({"accepts": [offer, {**offer, "payTo": "0x" + "cd" * 20, "amount": "1"}]}, "offers"),
    ]
    async with mcp_client(server.mcp_url, setup.token) as client:
        for changes, named in variants:
            refused = error_of(await client.call_tool("pay_x402", {**pay_args(url, required), **changes}))
            assert (refused["code"], refused["mismatch"]) == ("challenge_mismatch", named), changes
        # A URL that asks for no payment has no terms to match.
        free = error_of(await client.call_tool("pay_x402", pay_args(seller.url("/free"), required)))
        assert (free["code"], free["mismatch"], free["httpStatus"]) == (
            "challenge_mismatch",
            "no_challenge",
            200,
        )
    assert signs == []
    assert intents_of(db, setup.agent_id) == []
    assert (money.moved(), money.signatures("/premium")) == (0, 0)
    assert audit_types(db, setup.org_id).count("payment.challenge_mismatch") == len(variants) + 1


async def test_denials_and_caps_are_the_same_as_fetch_paids(
    server: RunningServer,
    module_sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    db = module_sqlite_db
    setup = agent_for(server, db, funded_wallet, max_per_tx="0.10", daily_cap="0.015")
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")
    required = challenge_of(seller, "/premium")
    report = challenge_of(seller, "/report")
    async with mcp_client(server.mcp_url, setup.token) as client:
        other_host = url.replace("127.0.0.1", "localhost")
        refused = error_of(await client.call_tool("pay_x402", pay_args(other_host, required)))
        assert (refused["code"], refused["host"]) == ("host_not_allowed", "localhost")
        refused = error_of(await client.call_tool("pay_x402", pay_args(seller.url("/report"), report)))
        assert refused["code"] == "policy_denied"
        assert "amount_exceeds_per_transaction" in refused["reasons"]
        refused = error_of(await client.call_tool("pay_x402", pay_args(url, required, maxAmountUsd="0.005")))
        assert (refused["code"], refused["amountUsd"]) == ("amount_exceeds_max", "0.01")

        # The first 0.01 fits under the 0.015 daily cap, though it is never sent; the second does not.
        first = structured(await client.call_tool("pay_x402", pay_args(url, required)))
        assert first["status"] == "signed"
        refused = error_of(await client.call_tool("pay_x402", pay_args(url, required)))
        assert (refused["code"], refused["reasons"]) == ("policy_denied", ["daily_cap_exceeded"])
        # A fetch_paid key is not a pay_x402 key: the same key names another purchase.
        reused = error_of(
            await client.call_tool("fetch_paid", {"url": url, "idempotencyKey": first["idempotencyKey"]})
        )
        assert reused["code"] == "idempotency_key_reused"
    assert [intent.status for intent in intents_of(db, setup.agent_id)] == ["submitted"]
    assert (money.moved(), money.signatures("/premium"), money.signatures("/report")) == (0, 0, 0)


async def test_a_held_payment_is_approved_with_a_passkey_and_the_retry_hands_over_the_header(
    server: RunningServer,
    module_sqlite_db: Database,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    db = module_sqlite_db
    setup = agent_for(server, db, funded_wallet, step_up="0.005")  # from 0.005 USD a person approves
    member = make_member(db, setup.org_id, role="approver")
    browser = SoftBrowser(server)
    browser.enroll(enrollment_link_token(db, member, setup.org_id, clock=server.clock))
    money = Money(test_usdc, seller, funded_wallet.address)
    url = seller.url("/premium")
    required = challenge_of(seller, "/premium")
    async with mcp_client(server.mcp_url, setup.token) as client:
        held = structured(await client.call_tool("pay_x402", pay_args(url, required)))
        assert (held["status"], held["reason"], held["thresholdUsd"]) == (
            "pending_approval",
            "threshold",
            "0.005",
        )
        assert "headerValue" not in held
        assert "call pay_x402 again" in held["next"]
        retry = pay_args(url, required, idempotencyKey=held["idempotencyKey"])
        again = structured(await client.call_tool("pay_x402", retry))
        assert (again["status"], again["approvalId"]) == ("pending_approval", held["approvalId"])

        approval = held["approvalId"]
        csrf = csrf_of(browser.get(f"/approvals/{approval}").text)
        started = browser.http.post(
            f"/approvals/{approval}/options", json={"csrf": csrf, "decision": "approve"}
        )
        assert started.status_code == 200, started.text
        options = started.json()
        answer = browser.authenticator.authenticate(options["publicKey"])
        decided = browser.http.post(
            f"/approvals/{approval}/verify",
            json={
                "csrf": csrf,
                "decision": "approve",
                "challengeId": options["challengeId"],
                "credential": answer,
            },
        )
        assert decided.status_code == 200, decided.text
        assert "the payment will be made when the agent retries" in browser.get(f"/approvals/{approval}").text
        assert money.signatures("/premium") == 0

        signed = structured(await client.call_tool("pay_x402", retry))
        assert (signed["status"], signed["idempotencyKey"], signed["replayed"]) == (
            "signed",
            held["idempotencyKey"],
            False,
        )
        assert send(url, signed).status_code == 200
        assert money.moved() == PREMIUM
        status = structured(await client.call_tool("get_approval_status", {"approvalId": approval}))
        assert (status["status"], status["intentId"]) == ("approved", signed["intentId"])
        replay = structured(await client.call_tool("pay_x402", retry))
        assert (replay["replayed"], replay["headerValue"]) == (True, signed["headerValue"])
        # Once the header is handed over, the page says what approving meant: Paywarden signed,
        # the agent sends.
        page = browser.get(f"/approvals/{approval}").text
        assert "the payment was signed and handed to the agent to send" in page
        assert "the payment was made" not in page
        browser.close()
    assert money.moved() == PREMIUM


async def test_one_key_raced_from_two_clients_signs_once(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = agent_for(paywarden, db, funded_wallet)
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    signs = counting(paywarden.services.purchases, "sign")
    url = seller.url("/premium")
    required = challenge_of(seller, "/premium")
    arguments = pay_args(url, required, idempotencyKey="race-key-0001")

    async def call() -> dict[str, Any]:
        async with mcp_client(paywarden.mcp_url, setup.token) as client:
            result = await client.call_tool("pay_x402", arguments)
        return dict(result.structured_content or {})

    answers = await asyncio.gather(*(call() for _ in range(4)))
    signed = [answer for answer in answers if answer.get("status") == "signed"]
    in_flight = [answer["error"]["code"] for answer in answers if "error" in answer]
    assert signed, answers
    assert {answer["headerValue"] for answer in signed} == {signed[0]["headerValue"]}
    assert set(in_flight) <= {"payment_in_progress"}
    assert len(signs) == 1
    assert len(intents_of(db, setup.agent_id)) == 1
    # Once it settled down, the key answers with that one header.
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        replay = structured(await client.call_tool("pay_x402", arguments))
    assert (replay["replayed"], replay["headerValue"]) == (True, signed[0]["headerValue"])
    assert len(signs) == 1


async def test_a_reported_receipt_is_kept_as_received_and_a_lying_one_settles_nothing(
    server: RunningServer,
    module_sqlite_db: Database,
    anvil: Anvil,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    db = module_sqlite_db
    setup = agent_for(server, db, funded_wallet)
    url = seller.url("/premium")
    required = challenge_of(seller, "/premium")
    async with mcp_client(server.mcp_url, setup.token) as client:
        sent = structured(await client.call_tool("pay_x402", pay_args(url, required)))
        answer = send(url, sent)
        assert answer.status_code == 200
        header = answer.headers[PAYMENT_RESPONSE]
        reported = structured(
            await client.call_tool(
                "report_receipt", {"idempotencyKey": sent["idempotencyKey"], "paymentResponse": header}
            )
        )
        real_tx = decode_header(header)["transaction"]
        # Kept as received; the look it prompted found the transfer on-chain.
        assert (reported["intentId"], reported["paymentResponse"]) == (sent["intentId"], header)
        assert (reported["status"], reported["receipt"]) == (
            "settled",
            {"state": "settled", "txHash": real_tx},
        )

        # Signed, never sent: a header claiming success, naming a real transfer (the other payment's).
        kept = structured(await client.call_tool("pay_x402", pay_args(url, required)))
        lie = encode_header(
            {
                "success": True,
                "transaction": real_tx,
                "network": "eip155:84532",
                "payer": funded_wallet.address,
            }
        )
        lied = structured(
            await client.call_tool("report_receipt", {"intentId": kept["intentId"], "paymentResponse": lie})
        )
        assert (lied["status"], lied["receipt"], lied["paymentResponse"]) == (
            "submitted",
            {"state": "pending", "txHash": None},
            lie,
        )
        await settle_from_the_chain(server, db, anvil)
        listed = structured(await client.call_tool("list_payments", {}))["payments"]
        assert {row["intentId"]: row["status"] for row in listed} == {
            sent["intentId"]: "settled",
            kept["intentId"]: "submitted",
        }

        # Reported words that are not a header at all are kept as received too, for a person to read.
        words = structured(
            await client.call_tool(
                "report_receipt", {"intentId": kept["intentId"], "paymentResponse": "paid, trust me"}
            )
        )
        assert (words["status"], words["paymentResponse"]) == (
            "submitted",
            None,
        )  # the agent sees only base64

        # Only a payment the agent sent takes a receipt from it.
        fetched = structured(await client.call_tool("fetch_paid", {"url": url}))
        refused = error_of(
            await client.call_tool(
                "report_receipt", {"intentId": fetched["intentId"], "paymentResponse": lie}
            )
        )
        assert (refused["code"], refused["intentId"]) == ("receipt_not_accepted", fetched["intentId"])
        unknown = error_of(
            await client.call_tool(
                "report_receipt", {"idempotencyKey": "no-such-key", "paymentResponse": lie}
            )
        )
        assert unknown["code"] == "payment_not_found"

    other = agent_for(server, db, funded_wallet)
    async with mcp_client(server.mcp_url, other.token) as client:
        theirs = error_of(
            await client.call_tool("report_receipt", {"intentId": kept["intentId"], "paymentResponse": lie})
        )
        assert theirs["code"] == "payment_not_found"
    with db.read() as session:
        row = session.get(PaymentIntent, kept["intentId"])
        assert row is not None
        assert (row.status, row.tx_hash, row.payment_response) == ("submitted", None, "paid, trust me")
    reports = [t for t in audit_types(db, setup.org_id) if t == "payment.receipt_reported"]
    assert len(reports) == 3


async def test_an_x402_v1_402_is_handed_an_x_payment_header(
    sqlite_db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    hostile_seller: HostileSeller,
    funded_wallet: FundedWallet,
) -> None:
    """x402 v1: the challenge in the 402's JSON body, each offer naming its resource, `X-PAYMENT`."""
    pin_payee(sqlite_db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    path = hostile_seller.path("v1")
    url = hostile_seller.url(path)
    async with httpx.AsyncClient(timeout=30) as http:
        asked = await http.get(url)
    assert asked.status_code == 402
    required = asked.json()
    before = test_usdc.balance_of(hostile_seller.pay_to)
    with serve(sqlite_db.url, extra=extra) as v1_server:
        setup = agent_for(v1_server, sqlite_db, funded_wallet)
        as_received = {"url": url, "accepts": required["accepts"], "x402Version": 1}
        async with mcp_client(v1_server.mcp_url, setup.token) as client:
            elsewhere = {**required["accepts"][0], "resource": hostile_seller.url(hostile_seller.path("v1"))}
            refused = error_of(await client.call_tool("pay_x402", {**as_received, "accepts": [elsewhere]}))
            assert (refused["code"], refused["mismatch"]) == ("challenge_mismatch", "resource")
            signed = structured(await client.call_tool("pay_x402", as_received))
            assert (signed["status"], signed["headerName"], signed["x402Version"]) == (
                "signed",
                "X-PAYMENT",
                1,
            )
            assert hostile_seller.signatures(path) == 0
            async with httpx.AsyncClient(timeout=30) as http:
                paid = await http.get(url, headers={"X-PAYMENT": signed["headerValue"]})
            assert paid.status_code == 200, paid.text
            reported = structured(
                await client.call_tool(
                    "report_receipt",
                    {"intentId": signed["intentId"], "paymentResponse": paid.headers["X-PAYMENT-RESPONSE"]},
                )
            )
    assert reported["status"] == "settled"
    assert hostile_seller.signatures(path) == 1
    assert test_usdc.balance_of(hostile_seller.pay_to) == before + PREMIUM
