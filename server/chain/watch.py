"""Out-of-policy detection: money that left an agent's wallet without a payment Paywarden allowed.

Paywarden signs only what the policy allowed, but the wallet's key can be used elsewhere (the same
key imported in another tool, a leaked key). This job reads each active wallet's token logs on
every network with an RPC, from a stored cursor, and classifies every movement out of the wallet:

- a `Transfer` preceded in its transaction by `AuthorizationUsed` for the wallet (EIP-3009) is
  matched to an intent by payer and nonce. Flagged: `unknown_nonce` (no intent has it),
  `pay_to_mismatch` / `amount_mismatch` (the intent's payee or amount differ), `payment_not_sent`
  (the intent's signature never left Paywarden), `settled_after_refusal` (the seller refused the
  payment yet collected it);
- a `Transfer` without an authorisation (a plain `transfer()` or a `transferFrom()`):
  `transfer_without_authorization`;
- an `Approval` granting an allowance above zero (`approve()` or `permit()`): `approval`.

Each finding is stored once per agent and token log, recorded as a `payment.out_of_policy` audit
event, and shown as a warning by get_budget. Detection is after the fact: nothing can be blocked
or reversed on-chain.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from server.audit.service import record as audit
from server.chain.rpc import RpcError
from server.chain.service import ChainService
from server.chain.settlement import (
    APPROVAL_TOPIC,
    AUTHORIZATION_USED_TOPIC,
    LOOKBACK_BLOCKS,
    TRANSFER_TOPIC,
    address_topic,
    topic_address,
)
from server.kit.clock import Clock, isoformat
from server.kit.db import Database, lock_org
from server.kit.ids import new_id
from server.kit.money import format_usd
from server.models import Agent, ChainScanCursor, OutOfPolicyFinding, PaymentIntent, Wallet
from server.payments.errors import NEVER_SENT_FAILURES

log = logging.getLogger("paywarden.chain")

ACTOR = "system:chain-watch"
# Blocks read again on every pass, so a shallow reorganisation cannot hide a movement.
OVERLAP_BLOCKS = 12
# A wallet's history before it was given to Paywarden is not Paywarden's business; the chain's
# clock and ours may differ by a little.
CLOCK_MARGIN = timedelta(minutes=2)
WARNING_WINDOW = timedelta(days=7)
MAX_WARNINGS = 10


@dataclass(frozen=True)
class Owner:
    org_id: str
    agent_id: str
    since: datetime  # when this agent's wallet with this address was created


@dataclass(frozen=True)
class Movement:
    tx_hash: str
    log_index: int
    block_number: int
    kind: str
    counterparty: str | None
    amount_atomic: int | None
    nonce: str | None = None
    intent_id: str | None = None


def _int(value: Any) -> int:
    return int(value, 16) if isinstance(value, str) else int(value)


def pair_authorizations(logs: list[dict[str, Any]], *, asset: str, wallet: str) -> dict[int, str | None]:
    """For each `Transfer` out of `wallet` in one transaction's logs: the nonce that authorised it.

    EIP-3009 tokens emit `AuthorizationUsed(authorizer, nonce)` right before the `Transfer` it
    authorises, so each transfer takes the latest unpaired authorisation before it.
    """
    pending: str | None = None
    paired: dict[int, str | None] = {}
    wallet, asset = wallet.lower(), asset.lower()
    for entry in sorted(logs, key=lambda item: _int(item.get("logIndex", "0x0"))):
        topics = entry.get("topics") or []
        if str(entry.get("address", "")).lower() != asset or not topics:
            continue
        if topics[0] == AUTHORIZATION_USED_TOPIC and len(topics) == 3 and topic_address(topics[1]) == wallet:
            pending = str(topics[2]).lower()
        elif topics[0] == TRANSFER_TOPIC and len(topics) == 3 and topic_address(topics[1]) == wallet:
            paired[_int(entry["logIndex"])] = pending
            pending = None
    return paired


def classify_transfer(
    *, to: str, value: int, nonce: str | None, intent: PaymentIntent | None
) -> tuple[str | None, str | None]:
    """(finding kind or None when the movement is a payment Paywarden allowed, matched intent id)."""
    if nonce is None:
        return "transfer_without_authorization", None
    if intent is None:
        return "unknown_nonce", None
    if to.lower() != intent.pay_to.lower():
        return "pay_to_mismatch", intent.id
    if value != intent.amount_atomic:
        return "amount_mismatch", intent.id
    if intent.status in ("created", "authorized") or intent.failure_code in NEVER_SENT_FAILURES:
        return "payment_not_sent", intent.id
    if intent.failure_code == "payment_rejected_by_seller":
        return "settled_after_refusal", intent.id
    return None, intent.id


class OutOfPolicyWatch:
    """Background job: scan active wallets' token logs and record out-of-policy movements."""

    name = "chain.out_of_policy"
    interval_seconds = 30.0

    def __init__(self, *, db: Database, chain: ChainService, clock: Clock, assets: dict[str, str]) -> None:
        self._db = db
        self._chain = chain
        self._clock = clock
        self._assets = assets

    def _owners(self) -> dict[str, list[Owner]]:
        """Active wallets by lower-case address (one key may serve agents of several orgs)."""
        with self._db.read() as session:
            rows = session.exec(
                select(Wallet, Agent)
                .join(Agent, col(Agent.id) == col(Wallet.agent_id))
                .where(col(Wallet.retired_at).is_(None))
            ).all()
        owners: dict[str, list[Owner]] = defaultdict(list)
        for wallet, agent in rows:
            owners[wallet.address.lower()].append(Owner(agent.org_id, agent.id, wallet.created_at))
        return owners

    async def run_once(self) -> int:
        found = 0
        owners = await self._db.run(self._owners)
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

    async def scan(self, network: str, asset: str, address: str, owners: list[Owner]) -> int:
        latest = await self._chain.block_number(network)
        cursor = await self._db.run(self._cursor, network, asset, address)
        start = max(0, cursor - OVERLAP_BLOCKS) if cursor is not None else max(0, latest - LOOKBACK_BLOCKS)
        if start > latest:
            return 0
        movements = await self._movements(network, asset, address, start, latest)
        earliest = min(owner.since for owner in owners) - CLOCK_MARGIN
        timestamps: dict[int, int] = {}
        kept: list[Movement] = []
        for movement in movements:
            if movement.block_number not in timestamps:
                timestamps[movement.block_number] = await self._chain.block_timestamp(
                    network, movement.block_number
                )
            if timestamps[movement.block_number] >= earliest.timestamp():
                kept.append(movement)
        return await self._db.run(self._record, network, asset, address, owners, kept, latest + 1)

    async def _movements(
        self, network: str, asset: str, address: str, start: int, end: int
    ) -> list[Movement]:
        wallet_topic = address_topic(address)
        transfers = await self._chain.logs(
            network, address=asset, topics=[TRANSFER_TOPIC, wallet_topic], from_block=start, to_block=end
        )
        approvals = await self._chain.logs(
            network, address=asset, topics=[APPROVAL_TOPIC, wallet_topic], from_block=start, to_block=end
        )
        movements: list[Movement] = []
        by_tx: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for entry in transfers:
            by_tx[str(entry["transactionHash"]).lower()].append(entry)
        for tx_hash, entries in by_tx.items():
            nonces = pair_authorizations(
                await self._chain.receipt_logs(network, tx_hash), asset=asset, wallet=address
            )
            for entry in entries:
                index = _int(entry["logIndex"])
                movements.append(
                    Movement(
                        tx_hash=tx_hash,
                        log_index=index,
                        block_number=_int(entry["blockNumber"]),
                        kind="",  # decided against the ledger in _record
                        counterparty=topic_address(entry["topics"][2]),
                        amount_atomic=_int(entry.get("data") or "0x0"),
                        nonce=nonces.get(index),
                    )
                )
        for entry in approvals:
            amount = _int(entry.get("data") or "0x0")
            if amount == 0 or len(entry.get("topics") or []) != 3:
                continue  # an allowance set back to zero takes nothing
            movements.append(
                Movement(
                    tx_hash=str(entry["transactionHash"]).lower(),
                    log_index=_int(entry["logIndex"]),
                    block_number=_int(entry["blockNumber"]),
                    kind="approval",
                    counterparty=topic_address(entry["topics"][2]),
                    amount_atomic=amount,
                )
            )
        return movements

    # -- database ------------------------------------------------------------------------

    def _cursor(self, network: str, asset: str, address: str) -> int | None:
        with self._db.read() as session:
            row = session.get(ChainScanCursor, (network, asset.lower(), address))
            return row.next_block if row is not None else None

    def _record(
        self,
        network: str,
        asset: str,
        address: str,
        owners: list[Owner],
        movements: list[Movement],
        next_block: int,
    ) -> int:
        now = self._clock.now()
        recorded = 0
        with self._db.write() as session:
            for movement in movements:
                if movement.kind != "approval":
                    intent = _intent_for(session, payer=address, nonce=movement.nonce)
                    kind, intent_id = classify_transfer(
                        to=movement.counterparty or "",
                        value=movement.amount_atomic or 0,
                        nonce=movement.nonce,
                        intent=intent,
                    )
                    if kind is None:
                        continue
                    movement = replace(movement, kind=kind, intent_id=intent_id)
                for owner in owners:
                    if _record_finding(session, owner, network, asset, address, movement, now):
                        recorded += 1
            cursor = session.get(ChainScanCursor, (network, asset.lower(), address))
            if cursor is None:
                cursor = ChainScanCursor(network=network, asset=asset.lower(), address=address, next_block=0)
            cursor.next_block = max(cursor.next_block, next_block)
            cursor.updated_at = now
            session.add(cursor)
        return recorded


def _intent_for(session: Session, *, payer: str, nonce: str | None) -> PaymentIntent | None:
    if nonce is None:
        return None
    return session.exec(
        select(PaymentIntent).where(
            func.lower(PaymentIntent.payer) == payer.lower(), PaymentIntent.nonce == nonce.lower()
        )
    ).first()


def _record_finding(
    session: Session,
    owner: Owner,
    network: str,
    asset: str,
    address: str,
    movement: Movement,
    now: datetime,
) -> bool:
    lock_org(session, owner.org_id)
    exists = session.exec(
        select(OutOfPolicyFinding.id).where(
            OutOfPolicyFinding.agent_id == owner.agent_id,
            OutOfPolicyFinding.network == network,
            OutOfPolicyFinding.tx_hash == movement.tx_hash,
            OutOfPolicyFinding.log_index == movement.log_index,
        )
    ).first()
    if exists is not None:
        return False
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
        kind=movement.kind,
        counterparty=movement.counterparty,
        amount_atomic=movement.amount_atomic,
        nonce=movement.nonce,
        intent_id=movement.intent_id,
        detected_at=now,
    )
    try:
        with session.begin_nested():
            session.add(finding)
    except IntegrityError:
        return False  # another process recorded it in the meantime
    audit(
        session,
        org_id=owner.org_id,
        type="payment.out_of_policy",
        actor=ACTOR,
        agent_id=owner.agent_id,
        subject_id=movement.intent_id,
        data=finding_view(finding),
        now=now,
    )
    log.warning("out-of-policy %s from %s on %s (tx %s)", movement.kind, address, network, movement.tx_hash)
    return True


def finding_view(finding: OutOfPolicyFinding) -> dict[str, Any]:
    return {
        "kind": finding.kind,
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


def recent_warnings(session: Session, *, agent_id: str, now: datetime) -> list[dict[str, Any]]:
    """get_budget's warnings: the agent's out-of-policy findings of the last seven days."""
    rows = session.exec(
        select(OutOfPolicyFinding)
        .where(
            OutOfPolicyFinding.agent_id == agent_id,
            col(OutOfPolicyFinding.detected_at) >= now - WARNING_WINDOW,
        )
        .order_by(col(OutOfPolicyFinding.detected_at).desc())
        .limit(MAX_WARNINGS)
    ).all()
    return [
        {"code": "out_of_policy_movement", **finding_view(row), "detectedAt": isoformat(row.detected_at)}
        for row in rows
    ]
