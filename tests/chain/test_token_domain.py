"""The EIP-712 domain a sweep signs under is the one the token declares and proves with its own
DOMAIN_SEPARATOR: EIP-5267's `eip712Domain()` on the test token (anvil), Circle's `name()` and
`version()` on a token without it (a node answering as Base's USDC does), and nothing at all when
what the token declares does not rebuild its separator."""

from __future__ import annotations

from typing import Any

import pytest

from server.chain.rpc import JsonRpc, RpcRefused
from server.chain.token_domain import (
    DOMAIN_SEPARATOR,
    EIP712_DOMAIN,
    NAME,
    VERSION,
    DomainNotDeclared,
    TokenDomain,
    domain_separator,
    token_domain,
)
from server.x402.transfer_authorization import TransferAuthorization, transfer_calldata
from tests.support.chain import CHAIN_ID, Anvil, TestToken

pytestmark = pytest.mark.anyio

BASE_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"


def _string(text: str) -> str:
    raw = text.encode()
    return (32).to_bytes(32, "big").hex() + len(raw).to_bytes(32, "big").hex() + raw.ljust(32, b"\x00").hex()


class CircleToken(JsonRpc):
    """A node answering `eth_call` as USDC (FiatTokenV2_2) on Base does: no `eip712Domain()`."""

    def __init__(self, *, separator: bytes) -> None:
        self.separator = separator

    async def call(self, method: str, params: list[Any]) -> Any:
        assert method == "eth_call"
        answers = {
            NAME: "0x" + _string("USD Coin"),
            VERSION: "0x" + _string("2"),
            DOMAIN_SEPARATOR: "0x" + self.separator.hex(),
        }
        selector = params[0]["data"]
        if selector == EIP712_DOMAIN:
            raise RpcRefused(method, {"message": "execution reverted"})
        return answers[selector]


async def test_the_test_token_declares_its_domain_through_eip5267(anvil: Anvil, test_usdc: TestToken) -> None:
    rpc = JsonRpc(anvil.rpc_url)
    try:
        domain = await token_domain(rpc, asset=test_usdc.address, chain_id=CHAIN_ID)
    finally:
        await rpc.aclose()

    # Its ERC-20 name is "USD Coin", but it signs under EIP712("USDC", "2"): the separator decides.
    assert domain == TokenDomain("USDC", "2")
    separator = test_usdc.contract.functions.DOMAIN_SEPARATOR().call()
    assert domain_separator(domain, chain_id=CHAIN_ID, verifying_contract=test_usdc.address) == bytes(
        separator
    )


async def test_circles_usdc_is_read_from_its_name_and_version() -> None:
    real = domain_separator(TokenDomain("USD Coin", "2"), chain_id=8453, verifying_contract=BASE_USDC)

    domain = await token_domain(CircleToken(separator=real), asset=BASE_USDC, chain_id=8453)

    assert domain == TokenDomain("USD Coin", "2")


async def test_a_domain_the_separator_does_not_prove_is_refused() -> None:
    other = domain_separator(TokenDomain("USD Coin", "2"), chain_id=84532, verifying_contract=BASE_USDC)

    with pytest.raises(DomainNotDeclared):
        await token_domain(CircleToken(separator=other), asset=BASE_USDC, chain_id=8453)


def test_the_calldata_carries_the_authorisation_and_its_signature_as_the_token_reads_them() -> None:
    authorization = TransferAuthorization(
        payer="0x1111111111111111111111111111111111111111",
        pay_to="0x2222222222222222222222222222222222222222",
        value=7_250_000,
        valid_after=100,
        valid_before=400,
        nonce="0x" + "ab" * 32,
    )
    r, s = "11" * 32, "22" * 32

    calldata = transfer_calldata(authorization, "0x" + r + s + "1b")
    low_v = transfer_calldata(authorization, "0x" + r + s + "00")

    words = [calldata[10 + 64 * i : 10 + 64 * (i + 1)] for i in range(9)]
    assert calldata[:10] == "0xe3ee160e"  # transferWithAuthorization(address,...,uint8,bytes32,bytes32)
    assert words == [
        "0" * 24 + "11" * 20,
        "0" * 24 + "22" * 20,
        f"{7_250_000:064x}",
        f"{100:064x}",
        f"{400:064x}",
        "ab" * 32,
        f"{27:064x}",
        r,
        s,
    ]
    assert low_v == calldata  # a 0/1 recovery id is the same signature as 27/28
    with pytest.raises(ValueError, match="65 bytes"):
        transfer_calldata(authorization, "0x" + r + s)
