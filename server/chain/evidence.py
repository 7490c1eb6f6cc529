"""Settlement truth: a payment is `settled` only when its transfer is found in chain logs, under
enough blocks; it can no longer settle only when the chain says so.

For an EIP-3009 payment the USDC contract emits, in one transaction, `AuthorizationUsed(payer,
nonce)` and `Transfer(payer, payTo, value)`. Finding the first by payer and nonce ties the chain
to our intent (the nonce is derived from it); the second must then match payee and amount, or the
movement is flagged instead of settled.

`judge` gives the chain's whole answer for one authorisation, counting confirmations: the
transfer is final once `depth` blocks were mined on top of the one holding it (a reorganisation
shallower than that cannot undo it). An authorisation can no longer be used once a block whose
timestamp is at or past its `validBefore` (the chain's clock: the token refuses it from then on)
is itself `depth` blocks deep and the token says, as of that block, that the nonce is unused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from eth_hash.auto import keccak

from server.chain.rpc import JsonRpc, RpcError

TRANSFER_TOPIC = "0x" + keccak(b"Transfer(address,address,uint256)").hex()
APPROVAL_TOPIC = "0x" + keccak(b"Approval(address,address,uint256)").hex()
AUTHORIZATION_USED_TOPIC = "0x" + keccak(b"AuthorizationUsed(address,bytes32)").hex()
AUTHORIZATION_STATE_SELECTOR = "0x" + keccak(b"authorizationState(address,bytes32)").hex()[:8]
LOOKBACK_BLOCKS = 20_000
SEARCH_CHUNK_BLOCKS = 2_000


def address_topic(address: str) -> str:
    return "0x" + "0" * 24 + address.lower().removeprefix("0x")


def topic_address(topic: str) -> str:
    return "0x" + topic[-40:].lower()


@dataclass(frozen=True)
class ExpectedTransfer:
    asset: str
    payer: str
    pay_to: str
    amount_atomic: int
    nonce: str


@dataclass(frozen=True)
class SettlementFinding:
    """`found` means the authorisation was used on-chain; `mismatch` names what differed."""

    found: bool
    tx_hash: str | None = None
    block_number: int | None = None
    mismatch: str | None = None
    actual_pay_to: str | None = None
    actual_amount: int | None = None

    @property
    def settled(self) -> bool:
        return self.found and self.mismatch is None


def _matching_transfer(logs: list[dict[str, Any]], expected: ExpectedTransfer) -> SettlementFinding:
    asset = expected.asset.lower()
    transfers = [
        log
        for log in logs
        if str(log.get("address", "")).lower() == asset
        and log.get("topics", [None])[0] == TRANSFER_TOPIC
        and len(log.get("topics", [])) == 3
        and topic_address(log["topics"][1]) == expected.payer.lower()
    ]
    tx_hash = logs[0].get("transactionHash") if logs else None
    block = int(logs[0]["blockNumber"], 16) if logs and logs[0].get("blockNumber") else None
    if not transfers:
        return SettlementFinding(True, tx_hash, block, mismatch="no_transfer")
    for log in transfers:
        to = topic_address(log["topics"][2])
        value = int(log.get("data", "0x0"), 16)
        if to == expected.pay_to.lower() and value == expected.amount_atomic:
            return SettlementFinding(True, tx_hash, block)
    first = transfers[0]
    to, value = topic_address(first["topics"][2]), int(first.get("data", "0x0"), 16)
    mismatch = "pay_to" if to != expected.pay_to.lower() else "amount"
    return SettlementFinding(True, tx_hash, block, mismatch=mismatch, actual_pay_to=to, actual_amount=value)


VerdictKind = Literal["settled", "mismatch", "pending", "lapsed", "open"]


@dataclass(frozen=True)
class ChainVerdict:
    """What the chain says of one authorisation now.

    `settled` / `mismatch`: used, under enough blocks (with the finding); `pending`: used, not deep
    enough yet; `lapsed`: provably never used and never usable again (`block` is the confirmed block
    that proves it, `block_timestamp` its time); `open`: unused, and the chain's clock has not yet
    passed validBefore at a confirmed block, so it could still be used.
    """

    kind: VerdictKind
    finding: SettlementFinding | None = None
    confirmations: int | None = None
    block: int | None = None
    block_timestamp: int | None = None


async def judge(
    rpc: JsonRpc, expected: ExpectedTransfer, *, tx_hash: str | None, valid_before: int, depth: int
) -> ChainVerdict:
    finding = await find_settlement(rpc, expected, tx_hash=tx_hash)
    if finding.found:
        kind: VerdictKind = "settled" if finding.settled else "mismatch"
        if depth == 0:
            return ChainVerdict(kind, finding)
        latest = _quantity(await rpc.call("eth_blockNumber", []))
        if finding.block_number is None:
            return ChainVerdict("pending", finding)
        confirmations = latest - finding.block_number
        return ChainVerdict(kind if confirmations >= depth else "pending", finding, confirmations)
    confirmed = _quantity(await rpc.call("eth_blockNumber", [])) - depth
    if confirmed < 0:
        return ChainVerdict("open")
    block = await rpc.call("eth_getBlockByNumber", [hex(confirmed), False])
    if not isinstance(block, dict):
        return ChainVerdict("open")
    timestamp = _quantity(block.get("timestamp"))
    if timestamp < valid_before:
        return ChainVerdict("open")
    if await _authorization_state(rpc, expected, block=hex(confirmed)) is not False:
        return ChainVerdict("open")  # used after all (a reorganisation?), or the token cannot say
    return ChainVerdict("lapsed", block=confirmed, block_timestamp=timestamp)


def _quantity(value: Any) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise RpcError("not a hex quantity")
    return int(value, 16)


async def find_settlement(
    rpc: JsonRpc, expected: ExpectedTransfer, *, tx_hash: str | None
) -> SettlementFinding:
    """Look for the authorisation's use: first in the transaction the seller named, then in logs."""
    if tx_hash:
        receipt = await rpc.call("eth_getTransactionReceipt", [tx_hash])
        if isinstance(receipt, dict) and receipt.get("status") == "0x1":
            logs = receipt.get("logs") or []
            if any(_is_authorization_used(log, expected) for log in logs):
                return _matching_transfer(logs, expected)
    if await _authorization_unused(rpc, expected):
        return SettlementFinding(False)
    latest = int(await rpc.call("eth_blockNumber", []), 16)
    used: list[dict[str, Any]] = []
    # Newest blocks first, in chunks providers accept: a payment is usually seconds old.
    end = latest
    while end >= max(0, latest - LOOKBACK_BLOCKS) and not used:
        start = max(0, end - SEARCH_CHUNK_BLOCKS + 1, latest - LOOKBACK_BLOCKS)
        found = await rpc.call(
            "eth_getLogs",
            [
                {
                    "address": expected.asset,
                    "fromBlock": hex(start),
                    "toBlock": hex(end),
                    "topics": [
                        AUTHORIZATION_USED_TOPIC,
                        address_topic(expected.payer),
                        expected.nonce.lower(),
                    ],
                }
            ],
        )
        used = [log for log in found or [] if isinstance(log, dict) and not log.get("removed")]
        end = start - 1
    if not used:
        return SettlementFinding(False)
    receipt = await rpc.call("eth_getTransactionReceipt", [used[0]["transactionHash"]])
    logs = receipt.get("logs") if isinstance(receipt, dict) else None
    return _matching_transfer(logs or [used[0]], expected)


async def _authorization_unused(rpc: JsonRpc, expected: ExpectedTransfer) -> bool:
    """True only when the token says the nonce is still unused: one cheap call saves a log search.

    A token without `authorizationState` (or an RPC that fails the call) gives no answer, and the
    logs are searched anyway.
    """
    return await _authorization_state(rpc, expected, block="latest") is False


async def _authorization_state(rpc: JsonRpc, expected: ExpectedTransfer, *, block: str) -> bool | None:
    """Whether the token says the nonce was used as of `block`; None when it cannot say."""
    data = AUTHORIZATION_STATE_SELECTOR + address_topic(expected.payer)[2:] + expected.nonce.lower()[2:]
    try:
        result = await rpc.call("eth_call", [{"to": expected.asset, "data": data}, block])
    except RpcError:
        return None
    if not (isinstance(result, str) and result.startswith("0x") and len(result) == 66):
        return None
    return int(result, 16) != 0


def _is_authorization_used(log: dict[str, Any], expected: ExpectedTransfer) -> bool:
    topics = log.get("topics") or []
    return (
        str(log.get("address", "")).lower() == expected.asset.lower()
        and len(topics) == 3
        and topics[0] == AUTHORIZATION_USED_TOPIC
        and topic_address(topics[1]) == expected.payer.lower()
        and topics[2].lower() == expected.nonce.lower()
    )


async def usdc_balance(rpc: JsonRpc, *, asset: str, owner: str) -> int:
    data = "0x70a08231" + "0" * 24 + owner.lower().removeprefix("0x")
    result = await rpc.call("eth_call", [{"to": asset, "data": data}, "latest"])
    return int(result, 16) if isinstance(result, str) and result.startswith("0x") and len(result) > 2 else 0
