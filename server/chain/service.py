"""Chain access per network, configured by PAYWARDEN_RPC_URLS. No RPC, no on-chain claims.

Every method answers None (or raises RpcError for the scanners, which retry on their next pass)
when the chain cannot be asked: a missing RPC never turns into a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server.chain.balances import BalanceCache
from server.chain.evidence import (
    ChainVerdict,
    ExpectedTransfer,
    SettlementFinding,
    find_settlement,
    judge,
    usdc_balance,
)
from server.chain.rpc import JsonRpc, RpcError, RpcRefused
from server.chain.submission import GasPayer, SignedTransaction
from server.chain.token_domain import TokenDomain, token_domain

LOG_CHUNK_BLOCKS = 2_000


class ChainService:
    def __init__(
        self,
        rpc_urls: Mapping[str, str],
        *,
        confirmations: Mapping[str, int] | None = None,
        balance_life_s: float = 0.0,
    ) -> None:
        self._rpcs = {network: JsonRpc(url) for network, url in rpc_urls.items()}
        self._confirmations = dict(confirmations or {})
        # Wallet balances known before a payment needs them (server/chain/balances.py).
        self.balances = BalanceCache(self.balance, life_s=balance_life_s)

    async def aclose(self) -> None:
        for rpc in self._rpcs.values():
            await rpc.aclose()

    @property
    def networks(self) -> tuple[str, ...]:
        return tuple(self._rpcs)

    def has_rpc(self, network: str) -> bool:
        return network in self._rpcs

    def confirmations(self, network: str) -> int:
        """Blocks that must be mined on top of a transfer's block before it is final (0 when the
        configuration names none for the network)."""
        return self._confirmations.get(network, 0)

    def _rpc(self, network: str) -> JsonRpc:
        rpc = self._rpcs.get(network)
        if rpc is None:
            raise RpcError(f"no RPC configured for {network}")
        return rpc

    async def find_settlement(
        self, network: str, expected: ExpectedTransfer, *, hint: str | None = None
    ) -> SettlementFinding | None:
        """The chain's answer for one authorisation, or None when it cannot be asked (no RPC, RPC
        down). `hint`, a transaction the seller named, is only a place to look first."""
        rpc = self._rpcs.get(network)
        if rpc is None:
            return None
        try:
            return await find_settlement(rpc, expected, tx_hash=hint)
        except (RpcError, KeyError, ValueError, TypeError):
            return None

    async def judge(
        self, network: str, expected: ExpectedTransfer, *, hint: str | None, valid_before: int
    ) -> ChainVerdict | None:
        """The chain's verdict on one authorisation at the network's confirmation depth, or None
        when it cannot be asked. Several calls: for background jobs, never for a tool call."""
        rpc = self._rpcs.get(network)
        if rpc is None:
            return None
        try:
            return await judge(
                rpc, expected, tx_hash=hint, valid_before=valid_before, depth=self.confirmations(network)
            )
        except (RpcError, KeyError, ValueError, TypeError):
            return None

    async def balance(self, *, network: str, asset: str, owner: str) -> int | None:
        rpc = self._rpcs.get(network)
        if rpc is None:
            return None
        try:
            return await usdc_balance(rpc, asset=asset, owner=owner)
        except (RpcError, ValueError):
            return None

    # -- a sweep's transaction (raise RpcError) -----------------------------------------------

    async def token_domain(self, network: str, *, asset: str) -> TokenDomain:
        """The EIP-712 name and version the token checks signatures against (server/chain/token_domain.py)."""
        return await token_domain(self._rpc(network), asset=asset, chain_id=chain_id_of(network))

    async def sign_call(self, network: str, payer: GasPayer, *, to: str, data: str) -> SignedTransaction:
        """A transaction calling `to` with `data`, signed by `payer`; RpcRefused when the call would
        revert now (nothing is signed then)."""
        return await payer.sign_call(self._rpc(network), chain_id=chain_id_of(network), to=to, data=data)

    async def send_transaction(self, network: str, signed: SignedTransaction) -> None:
        """Send a signed transaction; sending the same one again is harmless. Raises RpcError when
        the node neither takes it nor knows it already (mined or waiting)."""
        rpc = self._rpc(network)
        try:
            await rpc.call("eth_sendRawTransaction", [signed.raw])
        except RpcRefused:
            if await rpc.call("eth_getTransactionByHash", [signed.tx_hash]) is None:
                raise

    async def receipt(self, network: str, tx_hash: str) -> dict[str, Any] | None:
        """The transaction's receipt, or None while it is not mined (or not known)."""
        receipt = await self._rpc(network).call("eth_getTransactionReceipt", [tx_hash])
        return receipt if isinstance(receipt, dict) else None

    # -- reads for the scanners (raise RpcError) -------------------------------------------

    async def block_number(self, network: str) -> int:
        return _quantity(await self._rpc(network).call("eth_blockNumber", []))

    async def block_timestamp(self, network: str, number: int) -> int:
        block = await self._rpc(network).call("eth_getBlockByNumber", [hex(number), False])
        if not isinstance(block, dict):
            raise RpcError("block not found")
        return _quantity(block.get("timestamp"))

    async def logs(
        self, network: str, *, address: str, topics: list[str | None], from_block: int, to_block: int
    ) -> list[dict[str, Any]]:
        """eth_getLogs over a block range, asked in chunks providers accept."""
        rpc = self._rpc(network)
        found: list[dict[str, Any]] = []
        start = from_block
        while start <= to_block:
            end = min(start + LOG_CHUNK_BLOCKS - 1, to_block)
            result = await rpc.call(
                "eth_getLogs",
                [{"address": address, "fromBlock": hex(start), "toBlock": hex(end), "topics": topics}],
            )
            if not isinstance(result, list):
                raise RpcError("eth_getLogs returned no list")
            found.extend(log for log in result if isinstance(log, dict) and not log.get("removed"))
            start = end + 1
        return found

    async def receipt_logs(self, network: str, tx_hash: str) -> list[dict[str, Any]]:
        receipt = await self._rpc(network).call("eth_getTransactionReceipt", [tx_hash])
        if not isinstance(receipt, dict):
            raise RpcError("receipt not found")
        logs = receipt.get("logs")
        return [log for log in logs if isinstance(log, dict)] if isinstance(logs, list) else []


def chain_id_of(network: str) -> int:
    """The EVM chain id of a CAIP-2 `eip155:<id>` network."""
    namespace, _, reference = network.partition(":")
    if namespace != "eip155" or not reference.isdigit():
        raise RpcError(f"{network} is not an EVM network")
    return int(reference)


def _quantity(value: Any) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise RpcError("not a hex quantity")
    return int(value, 16)
