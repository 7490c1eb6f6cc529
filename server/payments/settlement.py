"""Settlement truth for payment intents: `settled` is set here, and only from chain logs.

`SettlementChecker.check` asks the chain about one intent. When the token's logs show the
intent's authorisation used (`AuthorizationUsed` for its payer and nonce) together with the
matching `Transfer` to its payee for its amount, the intent becomes `settled` with the hash of the
transaction that did it. When the authorisation was used but the transfer went elsewhere or moved
another amount, the intent is flagged (`payment.settlement_mismatch`, failure code
`settlement_mismatch_<what>`) and never settled. No RPC for the network, or no answer: nothing
changes, so the receipt stays `pending`.
"""

from __future__ import annotations

import logging

from auth.principal import Principal
from server.audit.service import record as audit
from server.chain.service import ChainService
from server.chain.settlement import ExpectedTransfer, SettlementFinding
from server.kit.clock import Clock
from server.kit.db import Database, lock_org
from server.kit.money import format_usd
from server.models import PaymentIntent
from server.models.enums import IntentStatus
from server.payments import ledger
from server.payments.errors import NEVER_SENT_FAILURES, IllegalTransition
from server.payments.repository import IntentRepository

log = logging.getLogger("paywarden.chain")

SETTLEABLE = (
    IntentStatus.SUBMITTED,
    IntentStatus.SETTLEMENT_PENDING,
    IntentStatus.FAILED,
    IntentStatus.EXPIRED,
)
MISMATCH_PREFIX = "settlement_mismatch"
SYSTEM = Principal.system("system:settlement")


def expected_transfer(intent: PaymentIntent) -> ExpectedTransfer:
    return ExpectedTransfer(
        asset=intent.asset,
        payer=intent.payer,
        pay_to=intent.pay_to,
        amount_atomic=intent.amount_atomic,
        nonce=intent.nonce,
    )


async def ask_chain(chain: ChainService, intent: PaymentIntent) -> SettlementFinding | None:
    """What the chain says about the intent's authorisation (None: it cannot be asked)."""
    # The seller's claimed transaction is only a place to look first; the logs decide.
    hint = intent.tx_hash or intent.seller_tx_hash
    return await chain.find_settlement(intent.network, expected_transfer(intent), hint=hint)


class SettlementChecker:
    def __init__(self, *, db: Database, chain: ChainService, clock: Clock) -> None:
        self._db = db
        self._chain = chain
        self._clock = clock

    async def check(self, intent: PaymentIntent, *, principal: Principal = SYSTEM) -> PaymentIntent:
        """The intent as it stands after asking the chain (unchanged when the chain cannot tell)."""
        failure = intent.failure_code or ""
        if (
            intent.status not in SETTLEABLE
            or failure.startswith(MISMATCH_PREFIX)
            or failure in NEVER_SENT_FAILURES
        ):
            return intent  # nothing left to learn, or a signature that never left Paywarden
        finding = await ask_chain(self._chain, intent)
        if finding is None:
            return intent
        return await self.apply(intent, finding, principal=principal)

    async def apply(
        self, intent: PaymentIntent, finding: SettlementFinding, *, principal: Principal = SYSTEM
    ) -> PaymentIntent:
        """Act on what the chain said: settle on a matching transfer, flag a different one."""
        if not finding.found:
            return intent
        if finding.settled:
            return await self._db.run(self._settle, principal, intent.id, finding)
        return await self._db.run(self._flag_mismatch, principal, intent.id, finding)

    def _settle(self, principal: Principal, intent_id: str, finding: SettlementFinding) -> PaymentIntent:
        now = self._clock.now()
        with self._db.write() as session:
            intents = IntentRepository(session)
            intent = intents.get_readable(principal, intent_id)
            if intent is None:
                raise IllegalTransition(detail="unknown intent")
            lock_org(session, intent.org_id)
            intents.refresh(intent)
            if intent.status == IntentStatus.SETTLED or intent.status not in SETTLEABLE:
                return intent  # another process got there first
            return ledger.update_intent(
                session,
                principal,
                intent_id=intent_id,
                to=IntentStatus.SETTLED,
                now=now,
                event="payment.settled",
                tx_hash=finding.tx_hash,
                settled_at=now,
            )

    def _flag_mismatch(
        self, principal: Principal, intent_id: str, finding: SettlementFinding
    ) -> PaymentIntent:
        now = self._clock.now()
        with self._db.write() as session:
            intents = IntentRepository(session)
            intent = intents.get_readable(principal, intent_id)
            if intent is None:
                raise IllegalTransition(detail="unknown intent")
            lock_org(session, intent.org_id)
            intents.refresh(intent)
            if (intent.failure_code or "").startswith(MISMATCH_PREFIX):
                return intent
            intent.failure_code = f"{MISMATCH_PREFIX}_{finding.mismatch}"
            intent.updated_at = now
            session.add(intent)
            audit(
                session,
                org_id=intent.org_id,
                type="payment.settlement_mismatch",
                actor=principal.actor,
                agent_id=intent.agent_id,
                subject_id=intent.id,
                data={
                    "status": str(intent.status),
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
