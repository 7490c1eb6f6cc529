"""A paid fetch_paid writes in two short transactions: one before the signature leaves (decision,
reservation, intent `submitted` and their audit events: the durable commit), one after the seller
answers (the outcome and its event). A denial writes once. Counted on the real server's engines."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event
from sqlmodel import select

from server.kit.db import Database
from server.models import PaymentIntent
from tests.support.chain import TestToken
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import RunningServer, error_of, mcp_client, structured
from tests.support.seller import Seller
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

WRITES = ("INSERT", "UPDATE", "DELETE")


class Writes:
    """Each committed transaction that wrote, as the audit event types it appended, in order."""

    def __init__(self) -> None:
        self.committed: list[tuple[str, ...]] = []
        self._open: dict[int, list[str] | None] = {}

    def begin(self, conn: Any) -> None:
        self._open[id(conn)] = None

    def statement(self, conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        verb = statement.lstrip().split(" ", 1)[0].upper()
        if verb not in WRITES:
            return
        types = self._open.get(id(conn)) or []
        if statement.lstrip().upper().startswith("INSERT INTO AUDIT_EVENTS"):
            values = parameters.values() if isinstance(parameters, dict) else parameters
            types += [v for v in values if isinstance(v, str) and v.split(".")[0] in ("payment", "wallet")]
        self._open[id(conn)] = types

    def commit(self, conn: Any) -> None:
        types = self._open.pop(id(conn), None)
        if types is not None:
            self.committed.append(tuple(types))


@contextmanager
def watched(db: Database) -> Iterator[Writes]:
    writes = Writes()
    hooks = (("begin", writes.begin), ("before_cursor_execute", writes.statement), ("commit", writes.commit))
    for engine in db.engines:  # SQLite's durable writes go through an engine of their own
        for name, hook in hooks:
            event.listen(engine, name, hook)
    try:
        yield writes
    finally:
        for engine in db.engines:
            for name, hook in hooks:
                event.remove(engine, name, hook)


async def test_a_paid_call_writes_once_before_the_signature_leaves_and_once_after(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    key = funded_wallet.private_key
    setup = make_agent(db, paywarden.settings, allow_hosts=["127.0.0.1"], wallet_key=key)
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        with watched(paywarden.services.db) as writes:
            paid = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
        await paywarden.services.purchases.settled_in_background()

    assert paid["status"] == "paid"
    before, after, *later = writes.committed
    assert before == ("payment.authorized", "payment.submitted")
    assert after == ("payment.receipt",)
    assert all(types == ("payment.settled",) for types in later), later
    with db.read() as session:
        (intent,) = session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == setup.agent_id)).all()
    assert intent.authorized_at == intent.submitted_at == intent.created_at


async def test_a_denied_call_writes_once_and_signs_nothing_that_leaves(
    paywarden: RunningServer, db: Database, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    setup = make_agent(
        db,
        paywarden.settings,
        allow_hosts=["127.0.0.1"],
        wallet_key=funded_wallet.private_key,
        max_per_tx="0.001",
    )
    pin_payee(db, url=seller.url("/premium"), pay_to=seller.pay_to)
    signatures_before = seller.payment_signatures("/premium")
    async with mcp_client(paywarden.mcp_url, setup.token) as client:
        with watched(paywarden.services.db) as writes:
            error = error_of(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))

    assert error["code"] == "policy_denied"
    assert writes.committed == [("payment.denied",)]
    assert seller.payment_signatures("/premium") == signatures_before
    with db.read() as session:
        assert session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == setup.agent_id)).all() == []
