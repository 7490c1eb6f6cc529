"""A `cdp` agent's wallet rotated and swept, end to end on anvil: the agent pays a seller from its
first CDP account, `paywarden admin wallet rotate` moves it to its next account, it pays again from
that one, and `paywarden admin wallet sweep` moves what is left in the first account to the new
one in one transfer CDP signed under the retired account's sweep-only policy. Every balance is
exact, and the chain shows one transfer out of the retired account besides its payment."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import PaymentIntent
from tests.support.cdp import connect_cdp
from tests.support.cdp_standin import CdpStandIn, running_standin
from tests.support.chain import Anvil, TestToken
from tests.support.paywarden import RunningServer, chain_environ, mcp_client, serve, structured
from tests.support.seller import Seller
from tests.support.sweeps import SweepChain, sweep_with_gas, wallet_command
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC
FIRST_FUNDS = 10_000_000
NEW_FUNDS = 1_000_000


@dataclass(frozen=True)
class Stage:
    server: RunningServer
    standin: CdpStandIn
    env: dict[str, str]  # the commands': the chain and the stand-in


@pytest.fixture(scope="module", name="stage")
def fixture_stage(
    module_sqlite_db: Database, anvil: Anvil, test_usdc: TestToken, seller: Seller
) -> Iterator[Stage]:
    chain = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    pin_payee(module_sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
    with running_standin() as (standin, url):
        env = {**chain, "PAYWARDEN_CDP_API_URL": url}
        with serve(module_sqlite_db.url, extra=env) as server:
            yield Stage(server, standin, env)


async def _pay(stage: Stage, token: str, seller: Seller) -> dict[str, Any]:
    async with mcp_client(stage.server.mcp_url, token) as client:
        return structured(
            await client.call_tool("fetch_paid", {"url": seller.url("/premium"), "maxAmountUsd": "0.05"})
        )


async def test_a_cdp_agent_pays_is_rotated_pays_from_its_new_account_and_the_old_one_is_swept(
    stage: Stage, module_sqlite_db: Database, anvil: Anvil, seller: Seller, test_usdc: TestToken
) -> None:
    db = module_sqlite_db
    chain = SweepChain(anvil, test_usdc, anvil.rpc_url)
    setup = make_agent(db, stage.server.settings, allow_hosts=["127.0.0.1"], max_per_tx="0.10")
    # The commands run an event loop of their own: each in a thread, as in a process of its own.
    first = (
        await anyio.to_thread.run_sync(
            lambda: connect_cdp(
                db,
                api_url=stage.env["PAYWARDEN_CDP_API_URL"],
                agent=setup.agent_id,
                credentials=stage.standin.credentials,
                env=stage.env,
            )
        )
    ).json()["address"]
    test_usdc.mint(first, FIRST_FUNDS)
    seller_before = test_usdc.balance_of(seller.pay_to)

    paid = await _pay(stage, setup.token, seller)
    assert (paid["status"], paid["receipt"]["state"]) == ("paid", "settled")
    assert test_usdc.balance_of(first) == FIRST_FUNDS - PREMIUM

    rotated = (
        await anyio.to_thread.run_sync(
            lambda: wallet_command(db, chain, "rotate", "--agent", setup.agent_id, "--json", env=stage.env)
        )
    ).json()
    new = rotated["address"]
    assert (rotated["mode"], rotated["retiredAddress"]) == ("cdp", first)
    assert stage.standin.account_named(rotated["accountName"]) is not None
    test_usdc.mint(new, NEW_FUNDS)

    again = await _pay(stage, setup.token, seller)
    assert (again["status"], again["receipt"]["state"]) == ("paid", "settled")
    assert test_usdc.balance_of(new) == NEW_FUNDS - PREMIUM
    assert test_usdc.balance_of(first) == FIRST_FUNDS - PREMIUM

    swept = (
        await anyio.to_thread.run_sync(
            lambda: sweep_with_gas(db, chain, setup.agent_id, "--json", env=stage.env)
        )
    ).json()

    (outcome,) = swept["sweeps"]
    assert outcome["outcome"] == "settled"
    assert (outcome["sweep"]["from"], outcome["sweep"]["to"]) == (first, new)
    assert outcome["sweep"]["amountAtomic"] == FIRST_FUNDS - PREMIUM
    assert test_usdc.balance_of(first) == 0
    assert test_usdc.balance_of(new) == NEW_FUNDS - PREMIUM + FIRST_FUNDS - PREMIUM
    assert test_usdc.balance_of(seller.pay_to) == seller_before + 2 * PREMIUM
    assert chain.transfers(first, new) == [outcome["sweep"]["txHash"]]
    assert len(chain.transfers_out(first)) == 2  # its payment, then its sweep
    with db.read() as session:
        intents = session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == setup.agent_id)).all()
    assert sorted(intent.payer for intent in intents) == sorted([first, new])
