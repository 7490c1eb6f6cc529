"""A chain of one test's own, whose clock and history the test controls: a fresh anvil and
TestUSDC per test, so moving the chain's time forward or undoing blocks never disturbs the chain
the other tests share.

It submits EIP-3009 authorisations as a seller's facilitator would, mines blocks at chosen times,
and reorganises: `snapshot` / `revert` drop every block after a point (their transactions with
them), and the same signed transaction can then be mined again.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from web3 import Web3

from server.models import PaymentIntent
from server.x402.transfer_authorization import TRANSFER_WITH_AUTHORIZATION_TYPES
from tests.support.chain import (
    CHAIN_ID,
    RECEIPT_TIMEOUT_S,
    Anvil,
    TestToken,
    anvil_binary,
    deploy_test_usdc,
    fresh_wallet,
)
from tests.support.plugin import require

NETWORK = "eip155:84532"
ANVIL_MISSING = "anvil not installed: run `make test-deps` (npm ci --prefix tests/support/node)"
DEPLOYER, FACILITATOR = 0, 1


@dataclass(frozen=True)
class Buyer:
    address: str
    private_key: str


@dataclass(frozen=True)
class Submitted:
    tx_hash: str
    block: int
    raw: bytes  # the signed transaction, to mine again after a reorganisation


class PrivateChain:
    def __init__(self, anvil: Anvil, token: TestToken) -> None:
        self.anvil = anvil
        self.token = token

    @property
    def rpc_url(self) -> str:
        return self.anvil.rpc_url

    @property
    def w3(self) -> Web3:
        return self.anvil.w3

    def _rpc(self, method: str, params: list[Any]) -> Any:
        answer = self.w3.provider.make_request(method, params)  # type: ignore[arg-type]
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer.get("result")

    def buyer(self, amount_atomic: int = 10_000_000) -> Buyer:
        address, key = fresh_wallet()
        self.token.mint(address, amount_atomic)
        return Buyer(address, key)

    # -- time and blocks -------------------------------------------------------------------

    def latest(self) -> int:
        return int(self.w3.eth.block_number)

    def timestamp(self, block: int | None = None) -> int:
        """The timestamp of `block`, or of the latest one."""
        return int(self.w3.eth.get_block("latest" if block is None else block)["timestamp"])

    def mine(self, blocks: int = 1, *, at: int | None = None) -> None:
        """Mine `blocks` empty blocks; the first stamped `at` (chain time, unix seconds) if given."""
        for index in range(blocks):
            if at is not None and index == 0:
                self._rpc("evm_setNextBlockTimestamp", [at])
            self._rpc("evm_mine", [])

    def next_block_at(self, timestamp: int) -> None:
        self._rpc("evm_setNextBlockTimestamp", [timestamp])

    def snapshot(self) -> str:
        return str(self._rpc("evm_snapshot", []))

    def revert(self, snapshot: str) -> None:
        if self._rpc("evm_revert", [snapshot]) is not True:
            raise RuntimeError("evm_revert refused the snapshot")

    # -- transfers -------------------------------------------------------------------------

    def submit(self, buyer: Buyer, intent: PaymentIntent) -> Submitted:
        """Use the intent's authorisation on-chain, as the seller's facilitator would."""
        message = {
            "from": buyer.address,
            "to": intent.pay_to,
            "value": intent.amount_atomic,
            "validAfter": intent.valid_after,
            "validBefore": intent.valid_before,
            "nonce": bytes.fromhex(intent.nonce[2:]),
        }
        signed = Account.sign_typed_data(
            buyer.private_key,
            full_message={
                "types": TRANSFER_WITH_AUTHORIZATION_TYPES,
                "primaryType": "TransferWithAuthorization",
                "domain": {
                    "name": "USDC",
                    "version": "2",
                    "chainId": CHAIN_ID,
                    "verifyingContract": self.token.address,
                },
                "message": message,
            },
        )
        function = self.token.contract.get_function_by_signature(
            "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)"
        )
        data = function(
            Web3.to_checksum_address(buyer.address),
            Web3.to_checksum_address(intent.pay_to),
            intent.amount_atomic,
            intent.valid_after,
            intent.valid_before,
            message["nonce"],
            bytes(signed.signature),
        )._encode_transaction_data()
        facilitator = self.anvil.accounts[FACILITATOR]
        tx = {
            "from": facilitator.address,
            "to": self.token.address,
            "data": data,
            "chainId": CHAIN_ID,
            "nonce": self.w3.eth.get_transaction_count(
                Web3.to_checksum_address(facilitator.address), "pending"
            ),
            "gas": 200_000,
            "maxFeePerGas": 100 * 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
        raw = bytes(Account.sign_transaction(tx, facilitator.private_key).raw_transaction)
        return self.send_raw(raw)

    def send_raw(self, raw: bytes) -> Submitted:
        tx_hash = self.w3.eth.send_raw_transaction(raw)
        receipt = self.w3.eth.wait_for_transaction_receipt(
            tx_hash, timeout=RECEIPT_TIMEOUT_S, poll_latency=0.01
        )
        if receipt["status"] != 1:
            raise RuntimeError("the authorisation's transfer reverted")
        return Submitted(tx_hash.to_0x_hex(), int(receipt["blockNumber"]), raw)

    def receipt(self, tx_hash: str) -> Any:
        return self._rpc("eth_getTransactionReceipt", [tx_hash])


@contextmanager
def private_chain() -> Iterator[PrivateChain]:
    binary = anvil_binary()
    if binary is None or not binary.is_file():
        require(ANVIL_MISSING)
    with Anvil(binary=binary) as node:
        token = deploy_test_usdc(node.w3, node.accounts[DEPLOYER].private_key)
        yield PrivateChain(node, token)
