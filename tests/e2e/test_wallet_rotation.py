"""Rotating an agent's wallet while one of its payments is in flight, end to end on anvil with the
x402 seller: the payment signed by the old wallet still reaches the seller, settles and is verified
on-chain against the old wallet; the agent's next payment, through another `paywarden serve`
process, pays from the new wallet; and the sweep then moves what the old wallet has left."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import PaymentIntent
from server.sellers.client import SellerRequest, SellerResponse
from tests.support.chain import Anvil, TestToken
from tests.support.cli import run_cli
from tests.support.fixtures_chain import FundedWallet
from tests.support.paywarden import chain_environ, mcp_client, serve, structured
from tests.support.processes import serve_processes
from tests.support.seller import Seller
from tests.support.sweeps import SweepChain, sweep_with_gas
from tests.support.tenants import make_agent, pin_payee

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # the seller's /premium: 0.01 USDC
TEST_TIMEOUT_S = 120


def _payments(db: Database, agent_id: str) -> list[PaymentIntent]:
    with db.read() as session:
        rows = session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == agent_id))
        return sorted(rows, key=lambda row: row.created_at)


async def test_a_payment_in_flight_settles_from_the_old_wallet_and_the_next_pays_from_the_new(
    sqlite_db: Database,
    anvil: Anvil,
    test_usdc: TestToken,
    seller: Seller,
    funded_wallet: FundedWallet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    chain = SweepChain(anvil, test_usdc, anvil.rpc_url)
    extra = chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address)
    old = funded_wallet.address
    with serve(sqlite_db.url, extra=extra) as first:
        public_url = first.public_url
        setup = make_agent(
            sqlite_db, first.settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key
        )
        pin_payee(sqlite_db, url=seller.url("/premium"), pay_to=seller.pay_to)
        # The paid request waits at the seller's door until the rotation has committed.
        at_the_door, rotated = threading.Event(), threading.Event()
        send = first.services.sellers.send

        async def slow_seller(request: SellerRequest, **options: object) -> SellerResponse:
            if options.get("after_payment"):
                at_the_door.set()
                await anyio.to_thread.run_sync(rotated.wait)
            return await send(request, **options)  # type: ignore[arg-type]

        monkeypatch.setattr(first.services.sellers, "send", slow_seller)

        async def rotate_meanwhile() -> str:
            await anyio.to_thread.run_sync(at_the_door.wait)
            done = await anyio.to_thread.run_sync(
                lambda: run_cli(
                    sqlite_db.url, "admin", "wallet", "rotate", "--agent", setup.agent_id, "--json", env=extra
                )
            )
            rotated.set()
            return str(done.json()["address"])

        with anyio.fail_after(TEST_TIMEOUT_S):
            async with mcp_client(first.mcp_url, setup.token) as client, anyio.create_task_group() as group:
                new_address: list[str] = []

                async def rotation() -> None:
                    new_address.append(await rotate_meanwhile())

                group.start_soon(rotation)
                paid = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))

    new = new_address[0]
    assert paid["status"] == "paid"
    assert paid["receipt"]["state"] == "settled"  # verified on-chain, against the old wallet
    (in_flight,) = _payments(sqlite_db, setup.agent_id)
    assert (in_flight.payer, in_flight.status) == (old, "settled")
    assert test_usdc.balance_of(old) == 10_000_000 - PREMIUM

    # The next payment, through another server process, pays from the new wallet.
    test_usdc.mint(new, 1_000_000)
    # The token is for the first server's URL: the process serves under it too.
    serving = serve_processes(
        1, database_url=sqlite_db.url, extra=extra, workdir=tmp_path, public_url=public_url
    )
    with serving as (_, processes):
        async with mcp_client(processes[0].mcp_url, setup.token) as client:
            again = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
    assert again["status"] == "paid"
    _, after = _payments(sqlite_db, setup.agent_id)
    assert (after.payer, after.status) == (new, "settled")
    assert test_usdc.balance_of(new) == 1_000_000 - PREMIUM
    assert test_usdc.balance_of(old) == 10_000_000 - PREMIUM  # untouched by the second payment

    # What the old wallet has left moves to the new one.
    swept = await anyio.to_thread.run_sync(lambda: sweep_with_gas(sqlite_db, chain, setup.agent_id, "--json"))
    (outcome,) = swept.json()["sweeps"]
    assert (outcome["outcome"], outcome["sweep"]["amountAtomic"]) == ("settled", 10_000_000 - PREMIUM)
    assert test_usdc.balance_of(old) == 0
    assert test_usdc.balance_of(new) == 1_000_000 - PREMIUM + 10_000_000 - PREMIUM
