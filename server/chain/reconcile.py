"""Settlement truth for payment intents: `settled` is set here, and only from chain logs.

`SettlementChecker.check` asks the chain about one intent. When the token's logs show the
intent's authorisation used (`AuthorizationUsed` for its payer and nonce) together with the
matching `Transfer` to its payee for its amount, the intent becomes `settled` with the hash of the
transaction that did it. When the authorisation was used but the transfer went elsewhere or moved
another amount, the intent is flagged (`payment.settlement_mismatch`, failure code
`settlement_mismatch_<what>`) and never settled. No RPC for the network, or no answer: nothing
changes, so the receipt stays `pending`.

`SettlementReconciler` is the background job that runs the check for intents whose money may
still be moving: submitted and pending ones, and failed or expired ones whose authorisation was
sent (a seller may settle and still answer 500).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import and_, or_
from sqlmodel import col, select

from server.audit.service import record as audit
from server.chain.service import ChainService
from server.chain.settlement import SettlementFinding
from server.kit.clock import Clock
from server.kit.db import Database, lock_org
from server.kit.money import format_usd
from server.models import PaymentIntent
from server.payments import ledger
from server.payments.errors import NEVER_SENT_FAILURES

log = logging.getLogger("paywarden.chain")

SETTLEABLE = ("submitted", "settlement_pending", "failed", "expired")
MISMATCH_PREFIX = "settlement_mismatch"
SYSTEM_ACTOR = "system:settlement"


class SettlementChecker:
    def __init__(self, *, db: Database, chain: ChainService, clock: Clock) -> None:
        self._db = db
        self._chain = chain
        self._clock = clock

    async def check(self, intent: PaymentIntent, *, actor: str = SYSTEM_ACTOR) -> PaymentIntent:
        """The intent as it stands after asking the chain (unchanged when the chain cannot tell)."""
        failure = intent.failure_code or ""
        if (
            intent.status not in SETTLEABLE
            or failure.startswith(MISMATCH_PREFIX)
            or failure in NEVER_SENT_FAILURES
        ):
            return intent  # nothing left to learn, or a signature that never left Paywarden
        finding = await self._chain.find_settlement(intent)
        if finding is None:
            return intent
        return await self.apply(intent, finding, actor=actor)

    async def apply(
        self, intent: PaymentIntent, finding: SettlementFinding, *, actor: str = SYSTEM_ACTOR
    ) -> PaymentIntent:
        """Act on what the chain said: settle on a matching transfer, flag a different one."""
        if not finding.found:
            return intent
        if finding.settled:
            return await self._db.run(self._settle, intent.id, finding, actor)
        return await self._db.run(self._flag_mismatch, intent.id, finding, actor)

    def _settle(self, intent_id: str, finding: SettlementFinding, actor: str) -> PaymentIntent:
        now = self._clock.now()
        with self._db.write() as session:
            intent = session.get(PaymentIntent, intent_id)
            assert intent is not None
            lock_org(session, intent.org_id)
            session.refresh(intent)
            if intent.status == "settled" or intent.status not in SETTLEABLE:
                return intent  # another process got there first
            return ledger.update_intent(
                session,
                intent_id=intent_id,
                to="settled",
                actor=actor,
                now=now,
                event="payment.settled",
                tx_hash=finding.tx_hash,
                settled_at=now,
            )

    def _flag_mismatch(self, intent_id: str, finding: SettlementFinding, actor: str) -> PaymentIntent:
        now = self._clock.now()
        with self._db.write() as session:
            intent = session.get(PaymentIntent, intent_id)
            assert intent is not None
            lock_org(session, intent.org_id)
            session.refresh(intent)
            if (intent.failure_code or "").startswith(MISMATCH_PREFIX):
                return intent
            intent.failure_code = f"{MISMATCH_PREFIX}_{finding.mismatch}"
            intent.updated_at = now
            session.add(intent)
            audit(
                session,
                org_id=intent.org_id,
                type="payment.settlement_mismatch",
                actor=actor,
                agent_id=intent.agent_id,
                subject_id=intent.id,
                data={
                    "status": intent.status,
                    "mismatch": finding.mismatch,
                    "txHash": finding.tx_hash,
                    "expectedPayTo": intent.pay_to,
                    "actualPayTo": finding.actual_pay_to,
                    "expectedAmountUsd": format_usd(intent.amount_atomic, atomic=True),
                    "actualAmountUsd": (
                        None
                        if finding.actual_amount is None
                        else format_usd(finding.actual_amount, atomic=True)
                    ),
                },
                now=now,
            )
            log.warning("settlement mismatch (%s) for intent %s", finding.mismatch, intent.id)
            return intent


class SettlementReconciler:
    """Background job: settle (or flag) intents from chain logs, for networks with an RPC."""

    name = "chain.settlement"
    interval_seconds = 15.0
    # How long after validBefore a payment is still looked for: covers an RPC that was down.
    grace = timedelta(hours=6)
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
        oldest = int((self._clock.now() - self.grace).timestamp())
        sent_and_unfinished = or_(
            col(PaymentIntent.status).in_(("submitted", "settlement_pending")),
            and_(
                col(PaymentIntent.status).in_(("failed", "expired")),
                or_(
                    col(PaymentIntent.failure_code).is_(None),
                    col(PaymentIntent.failure_code).not_in(NEVER_SENT_FAILURES),
                ),
            ),
        )
        with self._db.read() as session:
            return list(
                session.exec(
                    select(PaymentIntent)
                    .where(col(PaymentIntent.network).in_(networks))
                    .where(sent_and_unfinished)
                    .where(col(PaymentIntent.valid_before) > oldest)
                    .where(
                        or_(
                            col(PaymentIntent.failure_code).is_(None),
                            ~col(PaymentIntent.failure_code).startswith(MISMATCH_PREFIX),
                        )
                    )
                    .order_by(col(PaymentIntent.valid_before).desc())
                    .limit(self.batch)
                )
            )

    async def run_once(self) -> int:
        changed = 0
        for intent in await self._db.run(self._due):
            after = await self.checker.check(intent)
            if after.status != intent.status or after.failure_code != intent.failure_code:
                changed += 1
        return changed
