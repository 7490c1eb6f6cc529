"""Chain access per network, configured by PAYWARDEN_RPC_URLS. No RPC, no on-chain claims."""

from __future__ import annotations

from server.chain.rpc import JsonRpc, RpcError
from server.chain.settlement import ExpectedTransfer, SettlementFinding, find_settlement, usdc_balance
from server.models import PaymentIntent


class ChainService:
    def __init__(self, rpc_urls: dict[str, str]) -> None:
        self._rpcs = {network: JsonRpc(url) for network, url in rpc_urls.items()}

    async def aclose(self) -> None:
        for rpc in self._rpcs.values():
            await rpc.aclose()

    def has_rpc(self, network: str) -> bool:
        return network in self._rpcs

    async def find_settlement(self, intent: PaymentIntent) -> SettlementFinding | None:
        """The chain's answer for this intent, or None when it cannot be asked (no RPC, RPC down)."""
        rpc = self._rpcs.get(intent.network)
        if rpc is None:
            return None
        expected = ExpectedTransfer(
            asset=intent.asset,
            payer=intent.payer,
            pay_to=intent.pay_to,
            amount_atomic=intent.amount_atomic,
            nonce=intent.nonce,
        )
        try:
            return await find_settlement(rpc, expected, tx_hash=intent.tx_hash)
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
