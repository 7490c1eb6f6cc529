"""Settlement truth and out-of-policy detection on anvil, with real transfers.

`settled` comes only from the token's logs; without an RPC nothing is ever settled. Money moved
from an agent's wallet outside Paywarden (an authorisation with an unknown nonce, one that reuses
a Paywarden nonce for another payee, a plain transfer, an approval) is found in the logs, recorded
once as `payment.out_of_policy`, and shown by get_budget; Paywarden's own payments are not.
"""

from __future__ import annotations

import secrets
import time
from datetime import timedelta

import pytest
from eth_account import Account
from sqlmodel import col, select
from web3 import Web3

from server.chain.service import ChainService
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, OutOfPolicyFinding, PaymentIntent, Wallet
from server.payments.settlement.reconciler import SettlementReconciler
from server.payments.settlement.watch import OutOfPolicyWatch
from tests.support.chain import Anvil, TestToken, fresh_wallet, send_transaction
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import (  # noqa: F401 (pytest finds fixtures by their registered names)
    HostileSeller,
    fixture_hostile_seller,
)
from tests.support.paywarden import RunningServer, error_of, mcp_client, serve, structured
from tests.support.tenants import AgentSetup, make_agent, pin_payee
from tests.support.x402_wire import TRANSFER_WITH_AUTHORIZATION_TYPES

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

NETWORK = "eip155:84532"
SUBMITTER = 3  # anvil account that submits authorisations signed outside Paywarden
TRANSFER_WITH_AUTHORIZATION = (
    "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,uint8,bytes32,bytes32)"
)


def sign_and_submit(
    anvil: Anvil, token: TestToken, key: str, *, to: str, value: int, nonce: str
) -> dict[str, object]:
    """An EIP-3009 transfer signed with the wallet's key and submitted by someone else."""
    account = Account.from_key(key)
    now = int(time.time())
    message = {
        "from": account.address,
        "to": Web3.to_checksum_address(to),
        "value": value,
        "validAfter": now - 5,
        "validBefore": now + 120,
        "nonce": bytes.fromhex(nonce.removeprefix("0x")),
    }
    signed = Account.sign_typed_data(
        key,
        domain_data={"name": "USDC", "version": "2", "chainId": 84532, "verifyingContract": token.address},
        message_types=TRANSFER_WITH_AUTHORIZATION_TYPES,
        message_data=message,
    )
    data = token.contract.encode_abi(
        TRANSFER_WITH_AUTHORIZATION,
        [
            message["from"],
            message["to"],
            value,
            message["validAfter"],
            message["validBefore"],
            message["nonce"],
            signed.v,
            signed.r.to_bytes(32, "big"),
            signed.s.to_bytes(32, "big"),
        ],
    )
    return send_transaction(
        anvil.w3, anvil.accounts[SUBMITTER].private_key, {"to": token.address, "data": data}
    )


def send_from_wallet(anvil: Anvil, token: TestToken, key: str, function: str, args: list[object]) -> None:
    """A transaction sent by the wallet itself; gives it gas money first (x402 buyers hold no ETH)."""
    address = Account.from_key(key).address
    anvil.w3.provider.make_request("anvil_setBalance", [address, hex(10**18)])  # type: ignore[arg-type]
    send_transaction(anvil.w3, key, {"to": token.address, "data": token.contract.encode_abi(function, args)})


def findings(db: Database, agent: AgentSetup) -> list[OutOfPolicyFinding]:
    with db.read() as session:
        return list(
            session.exec(
                select(OutOfPolicyFinding)
                .where(OutOfPolicyFinding.agent_id == agent.agent_id)
                .order_by(col(OutOfPolicyFinding.block_number), col(OutOfPolicyFinding.log_index))
            )
        )


def audit_of(db: Database, agent: AgentSetup, kind: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(
            session.exec(select(AuditEvent).where(AuditEvent.org_id == agent.org_id, AuditEvent.type == kind))
        )


def intent(db: Database, intent_id: str) -> PaymentIntent:
    with db.read() as session:
        row = session.get(PaymentIntent, intent_id)
        assert row is not None
        return row


async def test_money_moved_outside_paywarden_is_flagged_and_paywardens_own_is_not(
    paywarden: RunningServer,
    db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    hostile_seller: HostileSeller,
    chain: ChainService,
) -> None:
    pin_payee(db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    agent = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    watch = OutOfPolicyWatch(db=db, chain=chain, clock=SystemClock(), assets={NETWORK: test_usdc.address})
    stranger, spender = fresh_wallet()[0], fresh_wallet()[0]

    async with mcp_client(paywarden.mcp_url, agent.token) as client:
        # A payment Paywarden allowed and the seller settled: never flagged.
        allowed = structured(
            await client.call_tool("fetch_paid", {"url": hostile_seller.url(hostile_seller.path("honest"))})
        )
        assert allowed["receipt"]["state"] == "settled"
        # A payment Paywarden signed whose answer was lost: its nonce is Paywarden's.
        lost = error_of(
            await client.call_tool("fetch_paid", {"url": hostile_seller.url(hostile_seller.path("drop"))})
        )
        assert lost["code"] == "payment_outcome_unknown"
        lost_nonce = intent(db, lost["intentId"]).nonce

        # Outside Paywarden, with the same key:
        sign_and_submit(
            anvil,
            test_usdc,
            funded_wallet.private_key,
            to=stranger,
            value=1234,
            nonce="0x" + secrets.token_hex(32),
        )
        hijack = sign_and_submit(
            anvil, test_usdc, funded_wallet.private_key, to=stranger, value=10_000, nonce=lost_nonce
        )
        send_from_wallet(anvil, test_usdc, funded_wallet.private_key, "transfer", [stranger, 5000])
        send_from_wallet(anvil, test_usdc, funded_wallet.private_key, "approve", [spender, 10**6])
        send_from_wallet(
            anvil, test_usdc, funded_wallet.private_key, "approve", [spender, 0]
        )  # a revocation takes nothing

        await watch.run_once()
        found = findings(db, agent)
        assert [f.kind for f in found] == [
            "unknown_nonce",
            "pay_to_mismatch",
            "transfer_without_authorization",
            "approval",
        ]
        by_kind = {str(f.kind): f for f in found}
        assert by_kind["unknown_nonce"].amount_atomic == 1234
        assert by_kind["unknown_nonce"].counterparty == stranger.lower()
        assert by_kind["pay_to_mismatch"].intent_id == lost["intentId"]
        hijack_hash = hijack["transactionHash"]
        assert isinstance(hijack_hash, bytes)
        assert by_kind["pay_to_mismatch"].tx_hash == "0x" + hijack_hash.hex()
        assert by_kind["transfer_without_authorization"].amount_atomic == 5000
        assert (by_kind["approval"].counterparty, by_kind["approval"].amount_atomic) == (
            spender.lower(),
            10**6,
        )
        allowed_tx = intent(db, allowed["intentId"]).tx_hash
        assert allowed_tx not in {f.tx_hash for f in found}

        recorded = audit_of(db, agent, "payment.out_of_policy")
        assert sorted(event.data["kind"] for event in recorded) == sorted(by_kind)
        assert {event.data["txHash"] for event in recorded} == {f.tx_hash for f in found}

        budget = structured(await client.call_tool("get_budget", {}))
        # Beside them, the wallet now holds less than a day of its cap: that is its own warning.
        movements = [w for w in budget["warnings"] if w["code"] == "out_of_policy_movement"]
        assert sorted(w["kind"] for w in movements) == sorted(by_kind)
        assert [w["code"] for w in budget["warnings"] if w not in movements] == ["wallet_low_balance"]

        # Reading the same blocks again records nothing twice.
        await watch.run_once()
        assert len(findings(db, agent)) == 4
        assert len(audit_of(db, agent, "payment.out_of_policy")) == 4

    # The hijacked nonce is Paywarden's payment, but the money went elsewhere: never settled.
    await SettlementReconciler(db=db, chain=chain, clock=SystemClock()).run_once()
    row = intent(db, lost["intentId"])
    assert row.status == "submitted"
    assert row.failure_code == "settlement_mismatch_pay_to"
    [mismatch] = [e for e in audit_of(db, agent, "payment.settlement_mismatch") if e.subject_id == row.id]
    assert mismatch.data["actualPayTo"] == stranger.lower()
    assert mismatch.data["mismatch"] == "pay_to"
    await SettlementReconciler(db=db, chain=chain, clock=SystemClock()).run_once()
    assert len(audit_of(db, agent, "payment.settlement_mismatch")) == 1


async def test_a_wallets_history_before_paywarden_is_not_its_business(
    paywarden: RunningServer,
    db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    chain: ChainService,
) -> None:
    send_from_wallet(anvil, test_usdc, funded_wallet.private_key, "transfer", [fresh_wallet()[0], 1])
    agent = make_agent(
        db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
    )
    # As if the wallet had been imported a day after that transfer.
    with db.write() as session:
        wallet = session.exec(select(Wallet).where(Wallet.agent_id == agent.agent_id)).one()
        wallet.created_at = SystemClock().now() + timedelta(days=1)
        session.add(wallet)
    watch = OutOfPolicyWatch(db=db, chain=chain, clock=SystemClock(), assets={NETWORK: test_usdc.address})
    await watch.run_once()
    assert findings(db, agent) == []


async def test_without_an_rpc_nothing_is_ever_settled(
    db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    hostile_seller: HostileSeller,
) -> None:
    extra = {"PAYWARDEN_ASSETS": f'{{"{NETWORK}": "{test_usdc.address}"}}'}  # the token, but no RPC
    pin_payee(db, url=hostile_seller.url("/"), pay_to=hostile_seller.pay_to)
    with serve(db.url, extra=extra) as server:
        agent = make_agent(
            db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        )
        async with mcp_client(server.mcp_url, agent.token) as client:
            paid = structured(
                await client.call_tool(
                    "fetch_paid", {"url": hostile_seller.url(hostile_seller.path("honest"))}
                )
            )
    # The seller really settled on anvil, but this Paywarden cannot see the chain.
    assert paid["status"] == "paid"
    assert paid["receipt"] == {"state": "pending", "txHash": None}
    no_rpc = ChainService({})
    assert await SettlementReconciler(db=db, chain=no_rpc, clock=SystemClock()).run_once() == 0
    assert intent(db, paid["intentId"]).status == "settlement_pending"
    # The same record, once a chain is there to ask: the logs settle it.
    with_chain = ChainService({NETWORK: anvil.rpc_url})
    try:
        await SettlementReconciler(db=db, chain=with_chain, clock=SystemClock()).run_once()
    finally:
        await with_chain.aclose()
    assert intent(db, paid["intentId"]).status == "settled"
