"""Movements out of a wallet, read from a USDC-like token's logs. Read-only facts, no judgement.

- every `Transfer` out of the wallet, with the EIP-3009 nonce that authorised it when the same
  transaction used one (`AuthorizationUsed(wallet, nonce)` right before the transfer);
- every `Approval` granting an allowance above zero (`approve()` or `permit()`).

Whether a movement was a payment Paywarden allowed is decided against the ledger, in
server/payments/settlement/watch.py.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from server.chain.evidence import (
    APPROVAL_TOPIC,
    AUTHORIZATION_USED_TOPIC,
    TRANSFER_TOPIC,
    address_topic,
    topic_address,
)
from server.chain.service import ChainService


@dataclass(frozen=True)
class Movement:
    tx_hash: str
    log_index: int
    block_number: int
    block_timestamp: int
    counterparty: str
    amount_atomic: int
    is_allowance: bool = False  # an Approval log, not a Transfer
    nonce: str | None = None  # the EIP-3009 authorisation behind a transfer, if any


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


async def wallet_movements(
    chain: ChainService, network: str, *, asset: str, wallet: str, from_block: int, to_block: int
) -> list[Movement]:
    """Every transfer out of `wallet` and every allowance it granted, in a block range."""
    wallet_topic = address_topic(wallet)
    transfers = await chain.logs(
        network,
        address=asset,
        topics=[TRANSFER_TOPIC, wallet_topic],
        from_block=from_block,
        to_block=to_block,
    )
    allowances = await chain.logs(
        network,
        address=asset,
        topics=[APPROVAL_TOPIC, wallet_topic],
        from_block=from_block,
        to_block=to_block,
    )
    timestamps: dict[int, int] = {}

    async def timestamp(block: int) -> int:
        if block not in timestamps:
            timestamps[block] = await chain.block_timestamp(network, block)
        return timestamps[block]

    movements: list[Movement] = []
    by_tx: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in transfers:
        by_tx[str(entry["transactionHash"]).lower()].append(entry)
    for tx_hash, entries in by_tx.items():
        nonces = pair_authorizations(await chain.receipt_logs(network, tx_hash), asset=asset, wallet=wallet)
        for entry in entries:
            index, block = _int(entry["logIndex"]), _int(entry["blockNumber"])
            movements.append(
                Movement(
                    tx_hash=tx_hash,
                    log_index=index,
                    block_number=block,
                    block_timestamp=await timestamp(block),
                    counterparty=topic_address(entry["topics"][2]),
                    amount_atomic=_int(entry.get("data") or "0x0"),
                    nonce=nonces.get(index),
                )
            )
    for entry in allowances:
        amount = _int(entry.get("data") or "0x0")
        if amount == 0 or len(entry.get("topics") or []) != 3:
            continue  # an allowance set back to zero takes nothing
        block = _int(entry["blockNumber"])
        movements.append(
            Movement(
                tx_hash=str(entry["transactionHash"]).lower(),
                log_index=_int(entry["logIndex"]),
                block_number=block,
                block_timestamp=await timestamp(block),
                counterparty=topic_address(entry["topics"][2]),
                amount_atomic=amount,
                is_allowance=True,
            )
        )
    return movements
