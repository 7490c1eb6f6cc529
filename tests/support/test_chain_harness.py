"""The chain harness works end to end: a real x402 payment on anvil, with no Paywarden code.

The buyer is built by hand from the protocol (tests.support.x402_wire), the seller is the
x402 SDK's own middleware and facilitator, and every balance is read from the chain.
"""

from __future__ import annotations

import time

import httpx
import pytest
from web3 import Web3

from tests.support.chain import DEV_ACCOUNTS, Anvil, TestToken, fresh_wallet
from tests.support.fixtures_chain import (  # noqa: F401 (pytest finds fixtures by their registered names)
    FUNDED_WALLET_ATOMIC,
    SELLER_ROUTES,
    FundedWallet,
    fixture_anvil,
    fixture_funded_wallet,
    fixture_seller,
    fixture_test_usdc,
)
from tests.support.seller import Seller
from tests.support.x402_wire import (
    PAYMENT_REQUIRED,
    PAYMENT_RESPONSE,
    PAYMENT_SIGNATURE,
    decode_header,
    sign_exact_payment,
)

pytestmark = pytest.mark.chain

SELLER_TIMEOUT_S = 30  # a paid request settles on chain before it answers: not httpx's 5 s


def test_anvil_serves_the_dev_accounts_on_chain_84532(anvil: Anvil) -> None:
    assert anvil.w3.eth.chain_id == 84532
    assert [a.lower() for a in anvil.w3.eth.accounts] == [a.address.lower() for a in DEV_ACCOUNTS]
    assert anvil.w3.eth.get_balance(Web3.to_checksum_address(DEV_ACCOUNTS[1].address)) > 0


def test_usdc_looks_like_usdc(test_usdc: TestToken) -> None:
    token = test_usdc.contract.functions
    assert (token.name().call(), token.symbol().call(), token.decimals().call()) == ("USD Coin", "USDC", 6)
    _, name, version, chain_id, verifying_contract, _, _ = token.eip712Domain().call()
    assert (name, version, chain_id, verifying_contract) == ("USDC", "2", 84532, test_usdc.address)
    assert token.TRANSFER_WITH_AUTHORIZATION_TYPEHASH().call().hex() == (
        "7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"
    )


def test_free_route_answers_without_payment(seller: Seller) -> None:
    response = httpx.get(seller.url("/free"), timeout=SELLER_TIMEOUT_S)
    assert response.status_code == 200
    assert response.json()["ok"] is True
    assert PAYMENT_REQUIRED not in response.headers


def test_paid_route_offers_exact_usdc_payment(seller: Seller, test_usdc: TestToken) -> None:
    response = httpx.get(seller.url("/report"), timeout=SELLER_TIMEOUT_S)
    assert response.status_code == 402
    required = decode_header(response.headers[PAYMENT_REQUIRED])
    assert required["x402Version"] == 2
    assert required["resource"]["url"] == seller.url("/report")
    [offer] = required["accepts"]
    assert offer["scheme"] == "exact"
    assert offer["network"] == "eip155:84532"
    assert offer["asset"] == test_usdc.address
    assert offer["payTo"] == seller.pay_to
    assert offer["amount"] == str(SELLER_ROUTES["/report"])
    assert offer["extra"] == {"name": "USDC", "version": "2"}


def test_real_payment_settles_on_chain_and_cannot_be_replayed(
    seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    path, price = "/premium", SELLER_ROUTES["/premium"]
    buyer_before = test_usdc.balance_of(funded_wallet.address)
    seller_before = test_usdc.balance_of(seller.pay_to)
    signatures_before = seller.payment_signatures(path)

    started = time.perf_counter()
    offer = httpx.get(seller.url(path), timeout=SELLER_TIMEOUT_S)
    assert offer.status_code == 402
    payment = sign_exact_payment(decode_header(offer.headers[PAYMENT_REQUIRED]), funded_wallet.private_key)
    paid = httpx.get(seller.url(path), headers={PAYMENT_SIGNATURE: payment.header}, timeout=SELLER_TIMEOUT_S)
    elapsed_ms = (time.perf_counter() - started) * 1000

    assert paid.status_code == 200, paid.headers.get(PAYMENT_RESPONSE) or paid.text
    assert paid.json() == {"ok": True, "path": path, "method": "GET"}
    receipt = decode_header(paid.headers[PAYMENT_RESPONSE])
    assert receipt["success"] is True
    assert receipt["payer"] == funded_wallet.address
    assert receipt["network"] == "eip155:84532"
    tx = test_usdc.w3.eth.get_transaction_receipt(receipt["transaction"])
    assert tx["status"] == 1
    assert tx["to"] == test_usdc.address

    assert test_usdc.balance_of(funded_wallet.address) == buyer_before - price
    assert test_usdc.balance_of(seller.pay_to) == seller_before + price
    assert test_usdc.authorization_state(funded_wallet.address, payment.nonce_bytes) is True
    assert seller.payment_signatures(path) == signatures_before + 1
    print(f"paid request on loopback (402, sign, verify, settle, 200): {elapsed_ms:.0f} ms")

    replay = httpx.get(
        seller.url(path), headers={PAYMENT_SIGNATURE: payment.header}, timeout=SELLER_TIMEOUT_S
    )
    assert not replay.is_success
    assert replay.status_code == 402
    # The SDK maps our token's "FiatTokenV2: authorization is used or canceled" revert.
    assert decode_header(replay.headers[PAYMENT_REQUIRED])["error"] == "invalid_exact_evm_nonce_already_used"
    assert test_usdc.balance_of(funded_wallet.address) == buyer_before - price
    assert test_usdc.balance_of(seller.pay_to) == seller_before + price
    assert seller.payment_signatures(path) == signatures_before + 2


def test_post_is_priced_like_get(seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet) -> None:
    path, price = "/dataset", SELLER_ROUTES["/dataset"]
    offer = httpx.post(seller.url(path), json={}, timeout=SELLER_TIMEOUT_S)
    assert offer.status_code == 402
    payment = sign_exact_payment(decode_header(offer.headers[PAYMENT_REQUIRED]), funded_wallet.private_key)
    paid = httpx.post(
        seller.url(path), json={}, headers={PAYMENT_SIGNATURE: payment.header}, timeout=SELLER_TIMEOUT_S
    )
    assert paid.status_code == 200, paid.headers.get(PAYMENT_RESPONSE) or paid.text
    assert paid.json()["method"] == "POST"
    assert test_usdc.balance_of(funded_wallet.address) == FUNDED_WALLET_ATOMIC - price


def test_payment_beyond_the_balance_is_refused_before_the_chain(seller: Seller, test_usdc: TestToken) -> None:
    poor_address, poor_key = fresh_wallet()
    test_usdc.mint(poor_address, SELLER_ROUTES["/report"] - 1)
    offer = httpx.get(seller.url("/report"), timeout=SELLER_TIMEOUT_S)
    payment = sign_exact_payment(decode_header(offer.headers[PAYMENT_REQUIRED]), poor_key)
    refused = httpx.get(
        seller.url("/report"), headers={PAYMENT_SIGNATURE: payment.header}, timeout=SELLER_TIMEOUT_S
    )
    assert refused.status_code == 402
    # The SDK maps our token's "ERC20: transfer amount exceeds balance" revert.
    assert (
        decode_header(refused.headers[PAYMENT_REQUIRED])["error"] == "invalid_exact_evm_insufficient_balance"
    )
    assert test_usdc.balance_of(poor_address) == SELLER_ROUTES["/report"] - 1
    assert test_usdc.authorization_state(poor_address, payment.nonce_bytes) is False
