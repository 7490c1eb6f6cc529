"""Settlement truth for payment intents: `settled` is set here, and only from chain logs.

When the token's logs show the intent's authorisation used (`AuthorizationUsed` for its payer and
nonce) together with the matching `Transfer` to its payee for its amount, under the network's
confirmation depth (`PAYWARDEN_CONFIRMATIONS`), the intent becomes `settled` with the hash of the
transaction that did it. When the authorisation was used but the transfer went elsewhere or moved
another amount, the intent is flagged (`payment.settlement_mismatch`, failure code
`settlement_mismatch_<what>`) and never settled. No RPC for the network, or no answer: nothing
changes, so the receipt stays `pending`.

Two ways in:
- `check`, on a tool call (right after paying, or a replay): one look with the calls it always made,
  and only where no confirmations are required; otherwise it leaves the intent as it is (receipt
  `pending`) and asks the chain nothing, so a tool call never waits on blocks;
- `reconcile`, from the background jobs: the chain's whole verdict at the confirmation depth. It
  settles or flags, and records chain evidence that a sent authorisation can never be used
  (`lapse_block`): an in-flight intent is then expired, and a failed or expired one stops counting
  against the caps. Nothing stops counting on this server's clock.
"""

from __future__ import annotations

import logging

from auth.principal import Principal
from server.audit.service import record as audit
from server.chain.evidence import ChainVerdict, ExpectedTransfer, SettlementFinding
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.money import format_usd
from server.models import PaymentIntent
from server.payments import ledger
from server.payments.errors import NEVER_SENT_FAILURES
from server.payments.repository import IN_FLIGHT
from server.payments.states import transition
from server.vocabulary import IntentStatus

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

    @staticmethod
    def _settled_for_good(intent: PaymentIntent) -> bool:
        """Nothing left to learn: final, flagged, proven lapsed, or a signature that never left."""
        failure = intent.failure_code or ""
        return (
            intent.status not in SETTLEABLE
            or failure.startswith(MISMATCH_PREFIX)
            or failure in NEVER_SENT_FAILURES
            or intent.lapse_block is not None
        )

    async def check(self, intent: PaymentIntent, *, principal: Principal = SYSTEM) -> PaymentIntent:
        """On a tool call: the intent after one look at the chain, where a transfer is final as soon
        as it is mined; unchanged where confirmations are required (the reconciler carries it)."""
        if self._settled_for_good(intent) or self._chain.confirmations(intent.network) > 0:
            return intent
        finding = await ask_chain(self._chain, intent)
        if finding is None:
            return intent
        return await self.apply(intent, finding, principal=principal)

    async def reconcile(self, intent: PaymentIntent, *, principal: Principal = SYSTEM) -> PaymentIntent:
        """From a background job: act on the chain's verdict at the network's confirmation depth."""
        if self._settled_for_good(intent):
            return intent
        verdict = await self._chain.judge(
            intent.network,
            expected_transfer(intent),
            hint=intent.tx_hash or intent.seller_tx_hash,
            valid_before=intent.valid_before,
        )
        if verdict is None:
            return intent  # no RPC, or no answer: nothing can be proven
        if verdict.kind in ("settled", "mismatch") and verdict.finding is not None:
            return await self.apply(intent, verdict.finding, principal=principal)
        if verdict.kind == "lapsed":
            return await self._db.run(self._lapse, principal, intent.id, verdict)
        return intent  # mined but not deep enough yet, or still usable: ask again next pass

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
            intent = ledger.locked_intent(session, principal, intent_id)
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

    def _lapse(self, principal: Principal, intent_id: str, verdict: ChainVerdict) -> PaymentIntent:
        """Record the chain's proof that the authorisation can never be used; expire it if it was
        still in flight. From then on it no longer counts against the caps."""
        assert verdict.block is not None
        assert verdict.block_timestamp is not None
        now = self._clock.now()
        with self._db.write() as session:
            intent = ledger.locked_intent(session, principal, intent_id)
            if self._settled_for_good(intent):
                return intent  # settled, flagged or proven lapsed by another pass meanwhile
            event = "payment.lapsed"
            if intent.status in IN_FLIGHT:
                transition(intent, IntentStatus.EXPIRED, now=now)
                intent.failure_code = "not_settled_before_valid_before"
                event = "payment.expired"
            intent.lapse_block = verdict.block
            intent.lapse_block_time = verdict.block_timestamp
            lapse = {
                "validBefore": intent.valid_before,
                "lapseBlock": verdict.block,
                "lapseBlockTime": verdict.block_timestamp,
            }
            ledger.record_change(session, principal, intent, event=event, data=lapse, now=now)
            log.info("intent %s can no longer settle (block %s)", intent.id, verdict.block)
            return intent

    def _flag_mismatch(
        self, principal: Principal, intent_id: str, finding: SettlementFinding
    ) -> PaymentIntent:
        now = self._clock.now()
        with self._db.write() as session:
            intent = ledger.locked_intent(session, principal, intent_id)
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
