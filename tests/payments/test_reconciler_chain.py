"""The reconciler asks the chain about sent payments whose authorisation lapsed: a transfer that
is there settles the intent; one that is not expires it (and it stops counting), but only once the
chain's own clock has passed validBefore, never on this server's clock alone."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from server.chain.service import ChainService
from server.kit.db import Database
from server.models import PaymentIntent
from server.payments.ledger import update_intent
from server.payments.settlement.reconciler import ExpireAuthorizations
from server.vocabulary import IntentStatus
from tests.support.chain import fresh_wallet
from tests.support.clocks import chain_clock
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.private_chain import NETWORK, PrivateChain, private_chain
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]


@pytest.fixture
def chain_of_my_own() -> Iterator[PrivateChain]:
    with private_chain() as chain:
        yield chain


async def test_lapsed_sent_payments_are_settled_or_expired_from_chain_logs(
    db: Database, chain_of_my_own: PrivateChain
) -> None:
    chain = chain_of_my_own
    settings = settings_for(database_url=db.url, port=8402)
    setup = make_agent(db, settings, allow_hosts=["api.example.com"])
    payee, _ = fresh_wallet()
    buyer = chain.buyer()
    pin_payee(db, url="https://api.example.com/v1/search", pay_to=payee)
    now = datetime.fromtimestamp(chain.timestamp(), UTC)  # the server's clock starts at the chain's
    rows = []
    for key in ("landed-0001", "vanished-01"):
        purchase = facts(key, asset=chain.token.address, pay_to=payee, payer=buyer.address)
        reservation = reserve_now(db, setup.agent_id, purchase, now)
        assert reservation.intent is not None
        with db.write() as session:
            rows.append(
                update_intent(
                    session,
                    OPERATOR,
                    intent_id=reservation.intent.id,
                    to=IntentStatus.SUBMITTED,
                    now=now,
                    event="x",
                )
            )
    landed, vanished = rows
    chain.submit(buyer, landed)

    rpc = ChainService({NETWORK: chain.rpc_url})
    early = ExpireAuthorizations(db=db, chain=rpc, clock=chain_clock(now))
    assert await early.run_once() == 0  # nothing has lapsed yet: nothing is decided
    late = chain_clock(datetime.fromtimestamp(vanished.valid_before, UTC) + timedelta(seconds=61))
    job = ExpireAuthorizations(db=db, chain=rpc, clock=late)
    # The server's clock is past validBefore, the chain's is not: only the landed one is decided.
    assert await job.run_once() == 1
    assert status_of(db, vanished.id) == ("submitted", None)
    chain.mine(1, at=vanished.valid_before + 1)
    assert await job.run_once() == 1
    await rpc.aclose()
    with db.read() as session:
        after_landed = session.get(PaymentIntent, landed.id)
        after_vanished = session.get(PaymentIntent, vanished.id)
    assert after_landed is not None
    assert after_vanished is not None
    assert after_landed.status == "settled"
    assert after_landed.tx_hash is not None
    assert (after_vanished.status, after_vanished.failure_code) == (
        "expired",
        "not_settled_before_valid_before",
    )
    assert after_vanished.lapse_block == chain.latest()
    assert chain.token.balance_of(payee) == landed.amount_atomic


def status_of(db: Database, intent_id: str) -> tuple[str, str | None]:
    with db.read() as session:
        row = session.get(PaymentIntent, intent_id)
    assert row is not None
    return str(row.status), row.failure_code
