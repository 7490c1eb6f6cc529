"""Caps count a sent payment until the chain says it cannot settle, never on this server's clock.

Each test runs its own anvil, whose clock it moves apart from the server's: a transfer can be
mined in a block stamped just before `validBefore` and seen by Paywarden long after; a payment
stops counting only once a block `PAYWARDEN_CONFIRMATIONS` deep is stamped at or past
`validBefore` and the token says, as of that block, that the nonce was never used.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlmodel import select

from server.chain.service import ChainService
from server.kit.clock import utc_day_start
from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.ledger import update_intent
from server.payments.repository import IntentRepository, SpendFilter
from server.payments.settlement.reconciler import ExpireAuthorizations, SettlementReconciler
from server.vocabulary import IntentStatus, RuleScope
from tests.support.chain import fresh_wallet
from tests.support.clocks import chain_clock
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.private_chain import NETWORK, Buyer, PrivateChain, private_chain
from tests.support.tenants import AgentSetup, make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

DEPTH = 2
PRICE = 10_000


@pytest.fixture
def chain_of_my_own() -> Iterator[PrivateChain]:
    with private_chain() as chain:
        yield chain


class World:
    """One agent, one payee and one buyer on a chain of the test's own, with a server clock."""

    def __init__(self, db: Database, chain: PrivateChain) -> None:
        self.db = db
        self.chain = chain
        self.setup: AgentSetup = make_agent(
            db,
            settings_for(database_url=db.url, port=8402),
            allow_hosts=["api.example.com"],
            daily_cap="1.00",
        )
        self.payee, _ = fresh_wallet()
        pin_payee(db, url="https://api.example.com/v1/search", pay_to=self.payee)
        self.buyer: Buyer = chain.buyer()
        # The server's clock starts at the chain's own time.
        self.start = datetime.fromtimestamp(chain.timestamp(), UTC)
        self.rpc = ChainService({NETWORK: chain.rpc_url}, confirmations={NETWORK: DEPTH})

    def sent(self, key: str, *, then: str | None = "payment_rejected_by_seller") -> PaymentIntent:
        """A payment whose signed authorisation left for the seller; `then` the seller's refusal
        (failed), or None: still in flight."""
        purchase = facts(key, asset=self.chain.token.address, pay_to=self.payee, payer=self.buyer.address)
        reservation = reserve_now(self.db, self.setup.agent_id, purchase, self.start)
        assert reservation.intent is not None
        with self.db.write() as session:
            row = update_intent(
                session,
                OPERATOR,
                intent_id=reservation.intent.id,
                to=IntentStatus.SUBMITTED,
                now=self.start,
                event="x",
            )
            if then is not None:
                row = update_intent(
                    session,
                    OPERATOR,
                    intent_id=row.id,
                    to=IntentStatus.FAILED,
                    now=self.start,
                    event="x",
                    failure_code=then,
                )
        return row

    def counted(self) -> int:
        """The agent's counted spend since the payments were authorised (the caps' own sum)."""
        with self.db.read() as session:
            spent, _ = IntentRepository(session).counted_spend(
                SpendFilter(self.setup.org_id, RuleScope.AGENT, self.setup.agent_id),
                since=utc_day_start(self.start),
                never_sent=NEVER_SENT_FAILURES,
            )
        return spent

    async def reconcile(self, *, server_time: datetime) -> None:
        clock = chain_clock(server_time)
        await SettlementReconciler(db=self.db, chain=self.rpc, clock=clock).run_once()
        await ExpireAuthorizations(db=self.db, chain=self.rpc, clock=clock).run_once()

    def row(self, intent_id: str) -> PaymentIntent:
        with self.db.read() as session:
            found = session.get(PaymentIntent, intent_id)
        assert found is not None
        return found

    def events(self, intent_id: str) -> list[AuditEvent]:
        with self.db.read() as session:
            return list(session.exec(select(AuditEvent).where(AuditEvent.subject_id == intent_id)))


async def test_a_transfer_stamped_just_before_valid_before_and_seen_later_counts_all_along(
    db: Database, chain_of_my_own: PrivateChain
) -> None:
    world = World(db, chain_of_my_own)
    refused = world.sent("refused-0001")
    late = datetime.fromtimestamp(refused.valid_before, UTC) + timedelta(hours=1)

    # This server's clock is long past validBefore; the chain's is not: it still counts.
    assert world.counted() == PRICE
    await world.reconcile(server_time=late)
    assert world.row(refused.id).lapse_block is None
    assert world.counted() == PRICE

    # The seller's facilitator lands it in a block stamped one second before validBefore...
    world.chain.next_block_at(refused.valid_before - 1)
    landed = world.chain.submit(world.buyer, refused)
    assert world.chain.timestamp(landed.block) == refused.valid_before - 1
    world.chain.mine(DEPTH, at=refused.valid_before + 30)
    assert world.counted() == PRICE
    # ...and when Paywarden looks, much later, it finds it and settles it: counted all along.
    await world.reconcile(server_time=late)
    after = world.row(refused.id)
    assert (after.status, after.tx_hash, after.lapse_block) == ("settled", landed.tx_hash, None)
    assert world.counted() == PRICE
    assert world.chain.token.balance_of(world.payee) == PRICE


async def test_a_sent_payment_stops_counting_only_on_the_chains_proof(
    db: Database, chain_of_my_own: PrivateChain
) -> None:
    world = World(db, chain_of_my_own)
    refused = world.sent("refused-0002")
    in_flight = world.sent("inflight-001", then=None)
    valid_before = refused.valid_before
    late = datetime.fromtimestamp(valid_before, UTC) + timedelta(hours=1)
    assert world.counted() == 2 * PRICE

    await world.reconcile(server_time=late)  # the chain's clock is behind validBefore
    assert world.counted() == 2 * PRICE
    assert world.row(in_flight.id).status == "submitted"

    # A block stamped at validBefore, but not yet DEPTH blocks deep: no proof yet.
    world.chain.mine(1, at=valid_before)
    proof_block = world.chain.latest()
    await world.reconcile(server_time=late)
    assert world.counted() == 2 * PRICE
    assert world.row(refused.id).lapse_block is None

    world.chain.mine(DEPTH)
    await world.reconcile(server_time=late)
    failed, expired = world.row(refused.id), world.row(in_flight.id)
    assert (failed.status, failed.failure_code) == ("failed", "payment_rejected_by_seller")
    assert (expired.status, expired.failure_code) == ("expired", "not_settled_before_valid_before")
    for row in (failed, expired):
        assert row.lapse_block is not None
        assert row.lapse_block >= proof_block
        assert row.lapse_block_time is not None
        assert row.lapse_block_time >= valid_before
    assert world.counted() == 0
    lapsed = [event for event in world.events(refused.id) if event.type == "payment.lapsed"]
    assert len(lapsed) == 1
    assert lapsed[0].data["lapseBlock"] == failed.lapse_block
    assert lapsed[0].data["validBefore"] == valid_before
    assert [event.type for event in world.events(in_flight.id)][-1] == "payment.expired"

    # The proof is sound: the token refuses the authorisation now.
    with pytest.raises(RuntimeError, match="reverted"):
        world.chain.submit(world.buyer, failed)
    await world.reconcile(server_time=late)
    assert world.row(refused.id).lapse_block == failed.lapse_block  # recorded once
