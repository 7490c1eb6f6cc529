"""The wallet refuses what the agent's policy forbids, even when Paywarden's own signer is bypassed.

The requests here are made straight through cdp-sdk with the organisation's credentials, as a
Paywarden compromised past its signer could make them: no payment intent exists, so Paywarden's
signer was never asked. CDP's Policy Engine (the stand-in, as CDP documents it) signs a transfer of
the network's USDC to a pinned payee within the cap, and refuses every other contract, payee, amount
or kind of typed data, and every hash, message and transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from cdp import CdpClient
from cdp.openapi_client.errors import ApiError
from eth_account.typed_transactions.dynamic_fee_transaction import DynamicFeeTransaction
from sqlmodel import select

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import PaymentIntent
from server.policy.service import PolicyChanges
from server.wallet_policies.accounts import provision_cdp_account
from server.x402.transfer_authorization import TRANSFER_WITH_AUTHORIZATION_TYPES, derive_nonce
from tests.support.cdp_standin import CdpStandIn, running_standin
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import change_policy, make_agent, pin_payee

pytestmark = pytest.mark.anyio

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"  # Base Sepolia's, as configured by default
OTHER_TOKEN = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
PAYEE = "0x209693bc6afc0c5328ba36faf03c514ef312287c"
ATTACKER = "0x1111111111111111111111111111111111111111"
CAP = 100_000  # 0.10 USDC


@dataclass(frozen=True)
class Wallet:
    standin: CdpStandIn
    url: str
    address: str
    agent_id: str
    db: Database


@pytest.fixture(name="wallet")
async def fixture_wallet(sqlite_db: Database) -> AsyncIterator[Wallet]:
    """An agent that may pay one catalog seller (payee pinned, verified sellers only), 0.10 a payment."""
    settings = settings_for(database_url=sqlite_db.url, port=1)
    pin_payee(sqlite_db, url="https://api.example.com/v1/report", pay_to=PAYEE)
    setup = make_agent(sqlite_db, settings, allow_hosts=["api.example.com"], max_per_tx="0.10")
    change_policy(sqlite_db, setup.agent_id, PolicyChanges(verified_sellers_only=True))
    with running_standin() as (standin, url):
        registered = await provision_cdp_account(
            sqlite_db,
            principal=OPERATOR,
            agent_ref=setup.agent_id,
            master=settings.master,
            api_url=url,
            usdc_by_network=settings.assets,
            clock=SystemClock(),
            credentials=standin.credentials,
        )
        yield Wallet(standin, url, registered.address, setup.agent_id, sqlite_db)


def _transfer(wallet: Wallet, *, contract: str = USDC, to: str = PAYEE, value: int = CAP) -> dict[str, Any]:
    return {
        "domain": {"name": "USDC", "version": "2", "chainId": 84532, "verifyingContract": contract},
        "types": TRANSFER_WITH_AUTHORIZATION_TYPES,
        "primary_type": "TransferWithAuthorization",
        "message": {
            "from": wallet.address,
            "to": to,
            "value": str(value),
            "validAfter": "0",
            "validBefore": "99999999999",
            "nonce": derive_nonce("not-an-intent"),
        },
    }


def _as_permit(typed: dict[str, Any]) -> dict[str, Any]:
    fields = TRANSFER_WITH_AUTHORIZATION_TYPES["TransferWithAuthorization"]
    types = {"EIP712Domain": TRANSFER_WITH_AUTHORIZATION_TYPES["EIP712Domain"], "Permit": fields}
    return {**typed, "types": types, "primary_type": "Permit"}


Call = Callable[[CdpClient, Wallet], Awaitable[Any]]


def _typed(**changes: Any) -> Call:
    async def sign(cdp: CdpClient, wallet: Wallet) -> Any:
        typed = _transfer(wallet, **{k: v for k, v in changes.items() if k != "permit"})
        if changes.get("permit"):
            typed = _as_permit(typed)
        return await cdp.evm.sign_typed_data(address=wallet.address, **typed)

    return sign


def _transaction(wallet: Wallet) -> str:
    from cdp.utils import serialize_unsigned_transaction

    transaction = DynamicFeeTransaction.from_dict(
        {
            "chainId": 84532,
            "nonce": 0,
            "maxPriorityFeePerGas": 1,
            "maxFeePerGas": 2,
            "gas": 60_000,
            "to": ATTACKER,
            "value": 0,
            "data": b"",
            "accessList": [],
            "type": 2,
        }
    )
    return str(serialize_unsigned_transaction(transaction))


REFUSED: dict[str, Call] = {
    "another-token": _typed(contract=OTHER_TOKEN),
    "another-payee": _typed(to=ATTACKER),
    "a-larger-amount": _typed(value=CAP + 1),
    "other-typed-data": _typed(permit=True),
    "a-hash": lambda cdp, w: cdp.evm.sign_hash(address=w.address, hash="0x" + "ab" * 32),
    "a-message": lambda cdp, w: cdp.evm.sign_message(address=w.address, message="transfer everything"),
    "a-transaction": lambda cdp, w: cdp.evm.sign_transaction(address=w.address, transaction=_transaction(w)),
    "a-sent-transaction": lambda cdp, w: cdp.evm.send_transaction(
        address=w.address, transaction=_transaction(w), network="base-sepolia"
    ),
}


def _client(wallet: Wallet) -> CdpClient:
    credentials = wallet.standin.credentials
    return CdpClient(
        api_key_id=credentials.api_key_id,
        api_key_secret=credentials.api_key_secret,
        wallet_secret=credentials.wallet_secret,
        base_path=wallet.url,
    )


async def test_within_the_bounds_cdp_signs(wallet: Wallet) -> None:
    async with _client(wallet) as cdp:
        signature = await _typed()(cdp, wallet)

    assert isinstance(signature, str)
    assert signature.startswith("0x")


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_cdp_refuses_what_the_agents_policy_forbids_though_paywarden_never_asked(
    wallet: Wallet, name: str
) -> None:
    async with _client(wallet) as cdp:
        with pytest.raises(ApiError) as refused:
            await REFUSED[name](cdp, wallet)

    assert (refused.value.http_code, refused.value.error_type) == (403, "policy_violation")
    with wallet.db.read() as session:
        assert (
            session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == wallet.agent_id)).all() == []
        )
