"""The payments domain's background jobs: the reconciler, and settlement checks.

`ExpireAuthorizations` closes what can no longer happen:
- an `authorized` intent whose `validBefore` has passed was never sent (an intent is marked
  `submitted` before its signature leaves this process, and cannot be once it is expired), so its
  authorisation can never be used: it is expired at once, on this server's clock;
- a `submitted` or `settlement_pending` intent past its `validBefore` (plus a grace period) is
  asked about: settled if the chain shows its transfer under enough blocks, expired only when the
  chain proves it can no longer be used (a confirmed block stamped past `validBefore`, the nonce
  unused as of it). Without an RPC for its network nothing can be proven, so it is left as it is
  and keeps counting against the caps: over-counting is the safe side;
- approvals past their TTL, or approved but not used within 10 minutes, are expired, and so are
  their held intents.

`SettlementReconciler` does the same for every intent whose money may still be moving: submitted
and pending ones, and failed or expired ones whose authorisation was sent (a seller may settle and
still answer 500) until the chain proves they can no longer settle; only that proof makes them
stop counting.

Safe with several processes: each job runs under a lease, and every change re-reads the row under
the organisation's lock and only moves it if it is still in the state the pass saw.
"""

from __future__ import annotations

import logging

from sqlmodel import Session

from auth.principal import Principal
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database, lock_org
from server.models import PaymentIntent
from server.payments import decisions
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.ledger import update_intent
from server.payments.repository import IntentRepository
from server.payments.settlement.checks import MISMATCH_PREFIX, SettlementChecker
from server.vocabulary import IntentStatus

log = logging.getLogger("paywarden.reconciler")

RECONCILER = Principal.system("system:reconciler")
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
        handled = await self._db.writing(self._expire_approvals)
        handled += await self._db.run(self._expire_unsent)
        for intent in await self._db.run(self._sent_and_lapsed):
            after = await self._settlement.reconcile(intent, principal=RECONCILER)
            handled += int(after.status != intent.status or after.failure_code != intent.failure_code)
        return handled

    def _expire_approvals(self, session: Session) -> int:
        return len(decisions.expire_lapsed(session, RECONCILER, now=self._clock.now()))

    def _expire_unsent(self) -> int:
        now = self._clock.now()
        with self._db.read() as session:
            due = IntentRepository(session).authorized_lapsed(now_unix=int(now.timestamp()), limit=BATCH)
        return sum(
            int(
                self._move(
                    intent_id,
                    IntentStatus.AUTHORIZED,
                    IntentStatus.EXPIRED,
                    "payment.expired",
                    failure_code="never_sent",
                )
            )
            for intent_id in due
        )

    def _sent_and_lapsed(self) -> list[PaymentIntent]:
        cutoff = int(self._clock.now().timestamp()) - GRACE_SECONDS
        with self._db.read() as session:
            return list(IntentRepository(session).in_flight_lapsed(cutoff_unix=cutoff, limit=BATCH))

    def _move(
        self, intent_id: str, expected: IntentStatus, to: IntentStatus, event: str, **fields: object
    ) -> bool:
        """Move the intent only if it is still `expected` (another process may have moved it)."""
        now = self._clock.now()
        with self._db.write() as session:
            intents = IntentRepository(session)
            intent = intents.get_readable(RECONCILER, intent_id)
            if intent is None:
                return False
            lock_org(session, intent.org_id)
            intents.refresh(intent)
            if intent.status != expected:
                return False
            update_intent(session, RECONCILER, intent_id=intent_id, to=to, now=now, event=event, **fields)
            log.info("intent %s: %s -> %s", intent_id, expected, to)
            return True


class SettlementReconciler:
    """Background job: settle, flag or lapse intents from chain logs, for networks with an RPC."""

    name = "chain.settlement"
    interval_seconds = 15.0
    batch = 100

    def __init__(self, *, db: Database, chain: ChainService, clock: Clock) -> None:
        self._db = db
        self._chain = chain
        self._clock = clock
        self.checker = SettlementChecker(db=db, chain=chain, clock=clock)

    def _due(self) -> list[PaymentIntent]:
        networks = self._chain.networks
        if not networks:
            return []
        with self._db.read() as session:
            return list(
                IntentRepository(session).settlement_due(
                    networks=networks,
                    never_sent=NEVER_SENT_FAILURES,
                    mismatch_prefix=MISMATCH_PREFIX,
                    limit=self.batch,
                )
            )

    async def run_once(self) -> int:
        changed = 0
        for intent in await self._db.run(self._due):
            after = await self.checker.reconcile(intent)
            if (
                after.status != intent.status
                or after.failure_code != intent.failure_code
                or after.lapse_block != intent.lapse_block
            ):
                changed += 1
        return changed
