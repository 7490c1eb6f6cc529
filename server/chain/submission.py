"""Putting a signed EIP-3009 authorisation on the chain: a transaction carrying the token's
`transferWithAuthorization` call (server/x402/transfer_authorization.py), signed by whoever pays
its gas.

Paywarden's wallets sign only authorisations, never transactions; a payment's authorisation is
submitted by the seller's facilitator. A sweep has no facilitator: the operator names a funded
account (its key in a variable they name, held by the command that uses it and never stored),
which signs the transaction here; or the operator submits the calldata themselves. Either way the
authorisation moves exactly what it says, once: its nonce can be used only once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.chain.rpc import JsonRpc, RpcError

GAS_MARGIN = 1.25  # over the node's estimate: a block's state may differ a little from the estimate's


@dataclass(frozen=True)
class SignedTransaction:
    raw: str  # 0x-prefixed hex, as eth_sendRawTransaction takes it
    tx_hash: str  # known before it is sent: the hash of `raw`
    sender: str


def _quantity(value: Any) -> int:
    if not isinstance(value, str) or not value.startswith("0x"):
        raise RpcError("not a hex quantity")
    return int(value, 16)


class GasPayer:
    """An account that pays a transaction's gas: its key lives in this object, for this command."""

    def __init__(self, private_key: bytes) -> None:
        from eth_account import Account

        self._account = Account.from_key(private_key)

    @property
    def address(self) -> str:
        return str(self._account.address)

    async def sign_call(self, rpc: JsonRpc, *, chain_id: int, to: str, data: str) -> SignedTransaction:
        """A transaction calling `to` with `data`, at the account's next nonce and today's fees.

        The gas is the node's estimate, so a call that would revert now (an authorisation already
        used, a balance gone) raises RpcRefused here and nothing is signed."""
        call = {"from": self.address, "to": to, "data": data}
        gas = _quantity(await rpc.call("eth_estimateGas", [call]))
        nonce = _quantity(await rpc.call("eth_getTransactionCount", [self.address, "pending"]))
        block = await rpc.call("eth_getBlockByNumber", ["latest", False])
        base_fee = _quantity(block.get("baseFeePerGas") if isinstance(block, dict) else None)
        tip = _quantity(await rpc.call("eth_maxPriorityFeePerGas", []))
        signed = self._account.sign_transaction(
            {
                "type": 2,
                "chainId": chain_id,
                "nonce": nonce,
                "to": to,
                "value": 0,
                "data": data,
                "gas": int(gas * GAS_MARGIN),
                "maxPriorityFeePerGas": tip,
                "maxFeePerGas": 2 * base_fee + tip,
            }
        )
        return SignedTransaction(
            raw="0x" + bytes(signed.raw_transaction).hex(),
            tx_hash="0x" + bytes(signed.hash).hex(),
            sender=self.address,
        )
