"""The reconciler: a background job that closes what can no longer happen.

- An `authorized` intent whose `validBefore` has passed was never sent (an intent is marked
  `submitted` before its signature leaves this process), so its authorisation can never be used:
  it is expired at once.
- A `submitted` or `settlement_pending` intent past its `validBefore` (plus a grace period for a
  transfer mined just in time) is settled if the chain shows its transfer, and expired if the
  chain shows none. Without an RPC for its network nothing can be proven, so it is left as it is
  and keeps counting against the caps: over-counting is the safe side.
- Approvals past their TTL, or approved but not used within 10 minutes, are expired, and so are
  their held intents.

Safe with several processes: the job runs under a lease, and every change re-reads the row under
the organisation's lock and only moves it if it is still in the state the pass saw.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlmodel import col, select

from server.approvals.service import expire_due
from server.chain.reconcile import SettlementChecker
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database, lock_org
from server.models import PaymentIntent
from server.payments.ledger import update_intent

log = logging.getLogger("paywarden.reconciler")

ACTOR = "system:reconciler"
GRACE_SECONDS = 60
BATCH = 100


class ExpireAuthorizations:
    name = "payments.expire_authorizations"
    interval_seconds = 30.0

    def __init__(self, *, db: Database, chain: ChainService, clock: Clock) -> None:
        self._db = db
        self._chain = chain
        self._clock = clock
        self._settlement = SettlementChecker(db=db, chain=chain, clock=clock)

    async def run_once(self) -> int:
        handled = await self._db.run(self._expire_approvals)
        handled += await self._db.run(self._expire_unsent)
        for intent in await self._db.run(self._sent_and_lapsed):
            finding = await self._chain.find_settlement(intent)
            if finding is None:
                continue  # no RPC for the network, or it failed: nothing can be proven
            if finding.found:
                # Settled, or flagged if the transfer differs: only ever from the chain's logs.
                after = await self._settlement.apply(intent, finding, actor=ACTOR)
                changed = after.status != intent.status or after.failure_code != intent.failure_code
            else:
                changed = await self._db.run(
                    self._move,
                    intent.id,
                    intent.status,
                    "expired",
                    "payment.expired",
                    failure_code="not_settled_before_valid_before",
                )
            handled += int(changed)
        return handled

    def _expire_approvals(self) -> int:
        with self._db.write() as session:
            return len(expire_due(session, now=self._clock.now()))

    def _expire_unsent(self) -> int:
        now = self._clock.now()
        with self._db.write() as session:
            due = list(
                session.exec(
                    select(PaymentIntent.id)
                    .where(PaymentIntent.status == "authorized")
                    .where(col(PaymentIntent.valid_before) < int(now.timestamp()))
                    .limit(BATCH)
                )
            )
        return sum(
            int(self._move(intent_id, "authorized", "expired", "payment.expired", failure_code="never_sent"))
            for intent_id in due
        )

    def _sent_and_lapsed(self) -> list[PaymentIntent]:
        cutoff = int(self._clock.now().timestamp()) - GRACE_SECONDS
        with self._db.read() as session:
            return list(
                session.exec(
                    select(PaymentIntent)
                    .where(col(PaymentIntent.status).in_(("submitted", "settlement_pending")))
                    .where(col(PaymentIntent.valid_before) < cutoff)
                    .order_by(col(PaymentIntent.valid_before))
                    .limit(BATCH)
                )
            )

    def _move(self, intent_id: str, expected: str, to: str, event: str, **fields: object) -> bool:
        """Move the intent only if it is still `expected` (another process may have moved it)."""
        now: datetime = self._clock.now()
        with self._db.write() as session:
            intent = session.get(PaymentIntent, intent_id)
            if intent is None:
                return False
            lock_org(session, intent.org_id)
            session.refresh(intent)
            if intent.status != expected:
                return False
            update_intent(session, intent_id=intent_id, to=to, actor=ACTOR, now=now, event=event, **fields)
            log.info("intent %s: %s -> %s", intent_id, expected, to)
            return True
