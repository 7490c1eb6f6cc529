"""Pytest fixtures for real on-chain x402 payments: anvil, TestUSDC, a seller, funded buyers.

Not registered anywhere by itself: a conftest does `from tests.support.fixtures_chain import *`
or a test module imports the fixtures it uses. The chain, token and seller live for the
whole session (anvil starts in well under a second, but the seller and token are shared
state worth reusing); each test gets its own freshly funded wallet, so balances it checks
are its own. The seller's PAYMENT-SIGNATURE counters are shared too: compare before/after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import NamedTuple

import pytest

from server.chain.service import ChainService
from server.kit.db import Database
from server.settings import BASE_SEPOLIA
from tests.support.chain import Anvil, TestToken, anvil_binary, deploy_test_usdc, fresh_wallet
from tests.support.paywarden import RunningServer, chain_environ, serve
from tests.support.plugin import require
from tests.support.seller import Seller, start_seller

__all__ = [
    "FundedWallet",
    "fixture_anvil",
    "fixture_chain",
    "fixture_funded_wallet",
    "fixture_identifier_seller",
    "fixture_paywarden",
    "fixture_seller",
    "fixture_test_usdc",
]

ANVIL_MISSING = "anvil not installed: run `make test-deps` (npm ci --prefix tests/support/node)"

# Prices in TestUSDC atomic units (6 decimals): 0.01, 0.50 and 2.00 USDC.
SELLER_ROUTES: dict[str, int] = {"/premium": 10_000, "/report": 500_000, "/dataset": 2_000_000}
FUNDED_WALLET_ATOMIC = 10_000_000  # 10 USDC

# Roles among anvil's dev accounts: keeping them apart keeps each key's nonces independent.
DEPLOYER_ACCOUNT = 0  # deploys and mints TestUSDC
FACILITATOR_ACCOUNT = 1  # the seller's facilitator: sends transferWithAuthorization, pays gas
IDENTIFIER_FACILITATOR_ACCOUNT = 7  # the payment-identifier seller's facilitator


class FundedWallet(NamedTuple):
    address: str
    private_key: str


# Each fixture's function is named fixture_<name> (pytest's own advice): a test module that
# imports it can then take the fixture as a parameter without shadowing the import, and
# pytest never mistakes fixture_test_usdc for a test.
@pytest.fixture(scope="session", name="anvil")
def fixture_anvil() -> Iterator[Anvil]:
    """A running anvil on 127.0.0.1 (chain id 84532), shared by the session."""
    binary = anvil_binary()
    if binary is None or not binary.is_file():
        require(ANVIL_MISSING)
    with Anvil(binary=binary) as node:
        yield node


@pytest.fixture(scope="session", name="test_usdc")
def fixture_test_usdc(anvil: Anvil) -> TestToken:
    """TestUSDC deployed on the session's anvil; anyone may mint."""
    return deploy_test_usdc(anvil.w3, anvil.accounts[DEPLOYER_ACCOUNT].private_key)


@pytest.fixture(scope="session", name="seller")
def fixture_seller(anvil: Anvil, test_usdc: TestToken) -> Iterator[Seller]:
    """A real x402 seller charging TestUSDC: /premium, /report, /dataset, and /free."""
    pay_to, _ = fresh_wallet()  # a fresh address, so its balance only ever holds payments
    running = start_seller(
        rpc_url=anvil.rpc_url,
        token_address=test_usdc.address,
        pay_to=pay_to,
        facilitator_key=anvil.accounts[FACILITATOR_ACCOUNT].private_key,
        routes=SELLER_ROUTES,
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="session", name="identifier_seller")
def fixture_identifier_seller(anvil: Anvil, test_usdc: TestToken) -> Iterator[Seller]:
    """The same seller, declaring the x402 payment-identifier extension and keeping its record
    (tests/support/payment_identifiers.py); its facilitator has a key of its own."""
    pay_to, _ = fresh_wallet()
    running = start_seller(
        rpc_url=anvil.rpc_url,
        token_address=test_usdc.address,
        pay_to=pay_to,
        facilitator_key=anvil.accounts[IDENTIFIER_FACILITATOR_ACCOUNT].private_key,
        routes=SELLER_ROUTES,
        payment_identifiers=True,
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(name="funded_wallet")
def fixture_funded_wallet(test_usdc: TestToken) -> FundedWallet:
    """A new wallet holding 10 USDC of TestUSDC (and no ETH: x402 buyers need none)."""
    address, private_key = fresh_wallet()
    test_usdc.mint(address, FUNDED_WALLET_ATOMIC)
    return FundedWallet(address, private_key)


@pytest.fixture(name="paywarden")
def fixture_paywarden(db: Database, anvil: Anvil, test_usdc: TestToken) -> Iterator[RunningServer]:
    """A Paywarden server (on both databases, through `db`) that pays and checks settlements on anvil."""
    with serve(db.url, extra=chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)) as server:
        yield server


@pytest.fixture(name="chain")
async def fixture_chain(anvil: Anvil) -> AsyncIterator[ChainService]:
    """Paywarden's own read access to anvil, for tests that run a job's pass themselves."""
    service = ChainService({BASE_SEPOLIA: anvil.rpc_url})
    try:
        yield service
    finally:
        await service.aclose()
