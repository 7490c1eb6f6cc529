"""`settled` only at the network's confirmation depth (`PAYWARDEN_CONFIRMATIONS`): a transfer
mined and then reorganised away never settles; mined again, it settles once deep enough. fetch_paid
never waits for blocks: it answers `pending`, and the reconciler settles the payment later."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from server.chain.service import ChainService
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import PaymentIntent
from server.payments.ledger import update_intent
from server.payments.settlement.checks import SettlementChecker
from server.payments.settlement.reconciler import SettlementReconciler
from server.vocabulary import IntentStatus
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.clocks import chain_clock
from tests.support.fixtures_chain import FundedWallet
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import chain_environ, mcp_client, serve, settings_for, structured
from tests.support.principals import OPERATOR
from tests.support.private_chain import NETWORK, PrivateChain, private_chain
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

DEPTH = 2


@pytest.fixture
def chain_of_my_own() -> Iterator[PrivateChain]:
    with private_chain() as chain:
        yield chain


def row(db: Database, intent_id: str) -> PaymentIntent:
    with db.read() as session:
        found = session.get(PaymentIntent, intent_id)
    assert found is not None
    return found


async def test_a_reorganised_transfer_is_not_settled_until_mined_again_deep_enough(
    db: Database, chain_of_my_own: PrivateChain
) -> None:
    chain = chain_of_my_own
    setup = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"])
    payee, _ = fresh_wallet()
    pin_payee(db, url="https://api.example.com/v1/search", pay_to=payee)
    buyer = chain.buyer()
    now = datetime.fromtimestamp(chain.timestamp(), UTC)
    purchase = facts("reorg-00001", asset=chain.token.address, pay_to=payee, payer=buyer.address)
    reservation = reserve_now(db, setup.agent_id, purchase, now)
    assert reservation.intent is not None
    intent_id = reservation.intent.id
    rpc = ChainService({NETWORK: chain.rpc_url}, confirmations={NETWORK: DEPTH})
    job = SettlementReconciler(db=db, chain=rpc, clock=chain_clock(now))

    before = chain.snapshot()
    with db.write() as session:
        update_intent(session, OPERATOR, intent_id=intent_id, to=IntentStatus.SUBMITTED, now=now, event="x")
    mined = chain.submit(buyer, row(db, intent_id))
    with db.write() as session:
        # The seller names the transaction: only a place to look, never proof.
        update_intent(
            session, OPERATOR, intent_id=intent_id, to=IntentStatus.SETTLEMENT_PENDING, now=now, event="x",
            seller_tx_hash=mined.tx_hash,
        )  # fmt: skip
    assert chain.token.balance_of(payee) == purchase.selection.amount_atomic
    await job.run_once()
    assert row(db, intent_id).status == "settlement_pending"  # mined, no block on top yet
    chain.mine(DEPTH - 1)
    await job.run_once()
    assert row(db, intent_id).status == "settlement_pending"  # one block short

    # A reorganisation drops the block that held the transfer, and the chain grows past it.
    chain.revert(before)
    assert chain.receipt(mined.tx_hash) is None
    assert chain.token.balance_of(payee) == 0
    chain.mine(DEPTH + 3)
    await job.run_once()
    after_reorg = row(db, intent_id)
    assert (after_reorg.status, after_reorg.tx_hash, after_reorg.lapse_block) == (
        "settlement_pending",
        None,
        None,
    )

    # The same transfer is mined again: settled once DEPTH blocks are on top of it.
    again = chain.send_raw(mined.raw)
    assert again.tx_hash == mined.tx_hash
    await job.run_once()
    assert row(db, intent_id).status == "settlement_pending"
    chain.mine(DEPTH)
    await job.run_once()
    settled = row(db, intent_id)
    assert (settled.status, settled.tx_hash) == ("settled", again.tx_hash)
    await rpc.aclose()


async def test_a_tool_call_never_asks_the_chain_where_confirmations_are_required(
    db: Database, chain_of_my_own: PrivateChain
) -> None:
    """The check fetch_paid makes after paying: where blocks must pile up first, it leaves the
    payment pending without a single call to the chain (the RPC here is not even reachable)."""
    unreachable = ChainService({NETWORK: "http://127.0.0.1:9"}, confirmations={NETWORK: DEPTH})
    setup = make_agent(db, settings_for(database_url=db.url, port=8402), allow_hosts=["api.example.com"])
    payee, _ = fresh_wallet()
    pin_payee(db, url="https://api.example.com/v1/search", pay_to=payee)
    now = datetime.fromtimestamp(chain_of_my_own.timestamp(), UTC)
    reservation = reserve_now(db, setup.agent_id, facts("hot-path-01", pay_to=payee), now)
    assert reservation.intent is not None
    with db.write() as session:
        sent = update_intent(
            session, OPERATOR, intent_id=reservation.intent.id, to=IntentStatus.SUBMITTED, now=now, event="x"
        )
    calls: list[str] = []
    original = ChainService.find_settlement

    async def counting(self: ChainService, *args: object, **kwargs: object) -> object:
        calls.append("find_settlement")
        return await original(self, *args, **kwargs)  # type: ignore[arg-type]

    checker = SettlementChecker(db=db, chain=unreachable, clock=chain_clock(now))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ChainService, "find_settlement", counting)
        after = await checker.check(sent)
    assert after.status == "submitted"
    assert calls == []
    await unreachable.aclose()


async def test_fetch_paid_answers_pending_until_the_reconciler_sees_enough_blocks(
    db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller, funded_wallet: FundedWallet
) -> None:
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address, confirmations=DEPTH)
    with serve(db.url, extra=extra) as server:
        setup = make_agent(
            db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        )
        pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
        call = {"url": seller.url("/premium"), "maxAmountUsd": "0.05"}
        async with mcp_client(server.mcp_url, setup.token) as client:
            paid = structured(await client.call_tool("fetch_paid", call))
            assert paid["status"] == "paid"
            assert paid["receipt"] == {"state": "pending", "txHash": None}
            again = {**call, "idempotencyKey": paid["idempotencyKey"]}
            replay = structured(await client.call_tool("fetch_paid", again))
            assert replay["receipt"]["state"] == "pending"

            rpc = ChainService(server.settings.rpc_urls, confirmations=server.settings.confirmations)
            reconciler = SettlementReconciler(db=db, chain=rpc, clock=SystemClock())
            await reconciler.run_once()
            assert row(db, paid["intentId"]).status == "settlement_pending"
            anvil.w3.provider.make_request("anvil_mine", [hex(DEPTH)])  # type: ignore[arg-type]
            await reconciler.run_once()
            await rpc.aclose()

            settled = structured(await client.call_tool("fetch_paid", again))
            assert settled["replayed"] is True
            assert settled["receipt"]["state"] == "settled"
            assert settled["receipt"]["txHash"].startswith("0x")
