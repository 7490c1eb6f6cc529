"""Out-of-policy detection: money that left an agent's wallet without a payment Paywarden allowed.

Paywarden signs only what the policy allowed, but the wallet's key can be used elsewhere (the same
key imported in another tool, a leaked key). This job reads each active wallet's token movements
on every network with an RPC (server/chain/movements.py), from a stored cursor, and judges each
against the ledger:

- a transfer authorised by an EIP-3009 nonce is matched to an intent by payer and nonce. Flagged:
  `unknown_nonce` (no intent has it), `pay_to_mismatch` / `amount_mismatch` (the intent's payee or
  amount differ), `payment_not_sent` (the intent's signature never left Paywarden),
  `settled_after_refusal` (the seller refused the payment yet collected it);
- a transfer without an authorisation (a plain `transfer()` or a `transferFrom()`):
  `transfer_without_authorization`;
- an allowance above zero (`approve()` or `permit()`): `approval`.

Each finding is stored once per agent and token log, recorded as a `payment.out_of_policy` audit
event, and shown as a warning by get_budget. Detection is after the fact: nothing can be blocked
or reversed on-chain.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import datetime, timedelta

from sqlmodel import Session

from auth.principal import Principal
from server.audit.service import record as audit
from server.chain.evidence import LOOKBACK_BLOCKS
from server.chain.movements import Movement, wallet_movements
from server.chain.rpc import RpcError
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database, lock_org
from server.kit.ids import new_id
from server.kit.money import format_usd
from server.models import ChainScanCursor, OutOfPolicyFinding, PaymentIntent
from server.payments.errors import NEVER_SENT_FAILURES, REFUSED_BY_SELLER
from server.payments.repository import FindingRepository, IntentRepository, WalletOwner, WatchRepository
from server.vocabulary import FindingKind, IntentStatus

log = logging.getLogger("paywarden.chain")

WATCH = Principal.system("system:chain-watch")
# Blocks read again on every pass, so a shallow reorganisation cannot hide a movement.
OVERLAP_BLOCKS = 12
# A wallet's history before it was given to Paywarden is not Paywarden's business; the chain's
# clock and ours may differ by a little.
CLOCK_MARGIN = timedelta(minutes=2)
WARNING_WINDOW = timedelta(days=7)
MAX_WARNINGS = 10


def classify_transfer(
    *, to: str, value: int, nonce: str | None, intent: PaymentIntent | None
) -> tuple[FindingKind | None, str | None]:
    """(finding kind, or None when the movement is a payment Paywarden allowed; matched intent id)."""
    if nonce is None:
        return FindingKind.TRANSFER_WITHOUT_AUTHORIZATION, None
    if intent is None:
        return FindingKind.UNKNOWN_NONCE, None
    if to.lower() != intent.pay_to.lower():
        return FindingKind.PAY_TO_MISMATCH, intent.id
    if value != intent.amount_atomic:
        return FindingKind.AMOUNT_MISMATCH, intent.id
    if (
        intent.status in (IntentStatus.CREATED, IntentStatus.AUTHORIZED)
        or intent.failure_code in NEVER_SENT_FAILURES
    ):
        return FindingKind.PAYMENT_NOT_SENT, intent.id
    if intent.failure_code in REFUSED_BY_SELLER:
        return FindingKind.SETTLED_AFTER_REFUSAL, intent.id
    return None, intent.id


def recent_findings(
    session: Session, principal: Principal, *, agent_id: str, now: datetime
) -> list[OutOfPolicyFinding]:
    """The agent's out-of-policy findings of the last seven days, newest first (get_budget's warnings)."""
    return list(
        FindingRepository(session).recent(
            principal, agent_id=agent_id, since=now - WARNING_WINDOW, limit=MAX_WARNINGS
        )
    )


def finding_record(finding: OutOfPolicyFinding) -> dict[str, object]:
    """What the audit log keeps of a finding."""
    return {
        "kind": str(finding.kind),
        "network": finding.network,
        "wallet": finding.wallet_address,
        "txHash": finding.tx_hash,
        "logIndex": finding.log_index,
        "blockNumber": finding.block_number,
        "counterparty": finding.counterparty,
        "amountUsd": None
        if finding.amount_atomic is None
        else format_usd(finding.amount_atomic, atomic=True),
        "nonce": finding.nonce,
        "intentId": finding.intent_id,
    }


class OutOfPolicyWatch:
    """Background job: scan active wallets' token logs and record out-of-policy movements."""

    name = "chain.out_of_policy"
    interval_seconds = 30.0

    def __init__(self, *, db: Database, chain: ChainService, clock: Clock, assets: dict[str, str]) -> None:
        self._db = db
        self._chain = chain
        self._clock = clock
        self._assets = assets

    def _owners(self, session: Session) -> dict[str, list[WalletOwner]]:
        """Active wallets by lower-case address (one key may serve agents of several orgs)."""
        owners: dict[str, list[WalletOwner]] = defaultdict(list)
        for owner in WatchRepository(session).active_wallet_owners():
            owners[owner.address].append(owner)
        return owners

    async def run_once(self) -> int:
        found = 0
        owners = await self._db.reading(self._owners)
        for network in self._chain.networks:
            asset = self._assets.get(network)
            if asset is None:
                continue
            for address, wallet_owners in owners.items():
                try:
                    found += await self.scan(network, asset, address, wallet_owners)
                except RpcError as exc:
                    # The cursor did not move: the same blocks are read again next pass.
                    log.warning("chain watch skipped %s on %s: %s", address, network, exc)
        return found

    async def scan(self, network: str, asset: str, address: str, owners: list[WalletOwner]) -> int:
        latest = await self._chain.block_number(network)
        cursor = await self._db.reading(self._cursor, network, asset, address)
        start = max(0, cursor - OVERLAP_BLOCKS) if cursor is not None else max(0, latest - LOOKBACK_BLOCKS)
        if start > latest:
            return 0
        movements = await wallet_movements(
            self._chain, network, asset=asset, wallet=address, from_block=start, to_block=latest
        )
        earliest = (min(owner.since for owner in owners) - CLOCK_MARGIN).timestamp()
        kept = [movement for movement in movements if movement.block_timestamp >= earliest]
        return await self._db.run(self._record, network, asset, address, owners, kept, latest + 1)

    def _cursor(self, session: Session, network: str, asset: str, address: str) -> int | None:
        row = WatchRepository(session).cursor(network=network, asset=asset, address=address)
        return row.next_block if row is not None else None

    def _record(
        self,
        network: str,
        asset: str,
        address: str,
        owners: list[WalletOwner],
        movements: list[Movement],
        next_block: int,
    ) -> int:
        now = self._clock.now()
        recorded = 0
        with self._db.write() as session:
            intents = IntentRepository(session)
            for movement in movements:
                kind: FindingKind | None = FindingKind.APPROVAL
                intent_id: str | None = None
                if not movement.is_allowance:
                    intent = (
                        None
                        if movement.nonce is None
                        else intents.by_payer_nonce(payer=address, nonce=movement.nonce)
                    )
                    kind, intent_id = classify_transfer(
                        to=movement.counterparty,
                        value=movement.amount_atomic,
                        nonce=movement.nonce,
                        intent=intent,
                    )
                if kind is None:
                    continue
                for owner in owners:
                    if _record_finding(
                        session, owner, network, asset, address, movement, kind, intent_id, now
                    ):
                        recorded += 1
            watch = WatchRepository(session)
            cursor = watch.cursor(network=network, asset=asset, address=address)
            if cursor is None:
                cursor = ChainScanCursor(network=network, asset=asset.lower(), address=address, next_block=0)
            cursor.next_block = max(cursor.next_block, next_block)
            cursor.updated_at = now
            session.add(cursor)
        return recorded


def _record_finding(
    session: Session,
    owner: WalletOwner,
    network: str,
    asset: str,
    address: str,
    movement: Movement,
    kind: FindingKind,
    intent_id: str | None,
    now: datetime,
) -> bool:
    lock_org(session, owner.org_id)
    finding = OutOfPolicyFinding(
        id=new_id("finding"),
        org_id=owner.org_id,
        agent_id=owner.agent_id,
        wallet_address=address,
        network=network,
        asset=asset,
        tx_hash=movement.tx_hash,
        log_index=movement.log_index,
        block_number=movement.block_number,
        kind=kind,
        counterparty=movement.counterparty,
        amount_atomic=movement.amount_atomic,
        nonce=movement.nonce,
        intent_id=intent_id,
        detected_at=now,
    )
    if not FindingRepository(session).insert_once(finding):
        return False
    audit(
        session,
        org_id=owner.org_id,
        type="payment.out_of_policy",
        actor=WATCH.actor,
        agent_id=owner.agent_id,
        subject_id=intent_id,
        data=finding_record(finding),
        now=now,
    )
    log.warning("out-of-policy %s from %s on %s (tx %s)", kind, address, network, movement.tx_hash)
    return True
