"""Sweeping a retired wallet on anvil, as an operator does it with `paywarden admin wallet sweep`:
its whole balance moves to the agent's current wallet in one transfer, verified on-chain, exactly
once, counted against no cap; without a gas account the command hands over the signed
authorisation and its calldata, and a run after the operator sent it finds the transfer; a sweep
is done only under the network's confirmations; only a retired wallet is swept, and only into the
agent's current wallet; the listing shows what each wallet holds."""

from __future__ import annotations

import json

import pytest
from sqlmodel import col, select

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, WalletSweep
from server.payments import ledger
from server.tenancy.service import get_agent
from tests.support.chain import Anvil, TestToken, fresh_wallet, send_transaction
from tests.support.cli import run_cli
from tests.support.principals import OPERATOR
from tests.support.sweeps import (
    NETWORK,
    SweepChain,
    gas_account,
    rotated_agent,
    sweep_with_gas,
    wallet_command,
)

pytestmark = pytest.mark.chain


@pytest.fixture
def chain(anvil: Anvil, test_usdc: TestToken) -> SweepChain:
    return SweepChain(anvil, test_usdc, anvil.rpc_url)


def _sweeps(db: Database, agent_id: str) -> list[WalletSweep]:
    with db.read() as session:
        rows = session.exec(select(WalletSweep).where(WalletSweep.agent_id == agent_id))
        return sorted(rows, key=lambda row: row.created_at)


def _events(db: Database, org_id: str, prefix: str) -> list[str]:
    with db.read() as session:
        events = session.exec(
            select(AuditEvent).where(AuditEvent.org_id == org_id).order_by(col(AuditEvent.seq))
        ).all()
    return [event.type for event in events if event.type.startswith(prefix)]


def test_a_sweep_moves_the_whole_balance_to_the_current_wallet_once(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain, funded_atomic=7_250_000)

    done = sweep_with_gas(sqlite_db, chain, agent.setup.agent_id, "--json")

    (outcome,) = done.json()["sweeps"]
    assert outcome["outcome"] == "settled"
    assert outcome["from"] == agent.old
    sweep = outcome["sweep"]
    assert (sweep["to"], sweep["amountAtomic"], sweep["status"]) == (agent.new, 7_250_000, "settled")
    assert (chain.token.balance_of(agent.old), chain.token.balance_of(agent.new)) == (0, 7_250_000)
    assert chain.transfers(agent.old, agent.new) == [sweep["txHash"]]
    assert _events(sqlite_db, agent.setup.org_id, "wallet.sweep_") == [
        "wallet.sweep_authorized",
        "wallet.sweep_signed",
        "wallet.sweep_submitted",
        "wallet.sweep_settled",
    ]

    again = sweep_with_gas(sqlite_db, chain, agent.setup.agent_id, "--json")

    assert [item["outcome"] for item in again.json()["sweeps"]] == ["nothing_to_sweep"]
    assert chain.transfers_out(agent.old) == [sweep["txHash"]]
    assert [row.status for row in _sweeps(sqlite_db, agent.setup.agent_id)] == ["settled"]
    # Money between the organisation's own wallets: no cap counts it, no payment lists it.
    with sqlite_db.read() as session:
        standing = ledger.standing(
            session, agent=get_agent(session, OPERATOR, agent.setup.agent_id), now=SystemClock().now()
        )
    assert standing.usage.spent_today_atomic == 0
    assert set(standing.usage.rule_spent_atomic.values()) == {0}
    assert (
        run_cli(sqlite_db.url, "admin", "payments", "list", "--org", agent.setup.org_id, "--json").json()[
            "payments"
        ]
        == []
    )


def test_without_a_gas_account_the_operator_sends_the_calldata_and_a_second_run_verifies_it(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)

    signed = wallet_command(sqlite_db, chain, "sweep", "--agent", agent.setup.agent_id, "--json")

    assert signed.exit_code == 3  # not finished: the operator sends it
    (outcome,) = json.loads(signed.stdout)["sweeps"]
    assert outcome["outcome"] == "awaiting_submission"
    submission = outcome["submission"]
    assert submission["token"].lower() == chain.token.address.lower()
    assert submission["authorization"]["to"] == agent.new
    assert submission["authorization"]["value"] == str(agent.funded_atomic)
    assert chain.token.balance_of(agent.old) == agent.funded_atomic  # nothing moved yet
    # The operator sends it from an account of their own.
    sender = gas_account(chain.anvil)
    receipt = send_transaction(
        chain.anvil.w3, sender, {"to": submission["token"], "data": submission["calldata"]}
    )

    verified = wallet_command(sqlite_db, chain, "sweep", "--agent", agent.setup.agent_id, "--json")

    (outcome,) = verified.json()["sweeps"]
    assert outcome["outcome"] == "settled"
    assert outcome["sweep"]["txHash"] == "0x" + bytes(receipt["transactionHash"]).hex()
    assert chain.token.balance_of(agent.new) == agent.funded_atomic
    assert len(chain.transfers_out(agent.old)) == 1


def test_only_a_retired_wallet_is_swept(sqlite_db: Database, chain: SweepChain) -> None:
    agent = rotated_agent(sqlite_db, chain)

    current = wallet_command(
        sqlite_db, chain, "sweep", "--agent", agent.setup.agent_id, "--wallet", agent.new
    )
    unknown = wallet_command(
        sqlite_db, chain, "sweep", "--agent", agent.setup.agent_id, "--wallet", fresh_wallet()[0]
    )

    assert current.exit_code == 1
    assert current.stderr.startswith("error: wallet_not_retired: That wallet is the agent's current wallet")
    assert unknown.stderr.startswith("error: wallet_not_found:")
    assert chain.token.balance_of(agent.old) == agent.funded_atomic
    assert _sweeps(sqlite_db, agent.setup.agent_id) == []


def test_the_listing_shows_the_retired_wallet_with_its_balance_and_its_sweep(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain, funded_atomic=3_000_000)

    before = wallet_command(sqlite_db, chain, "list", "--agent", agent.setup.agent_id, "--json").json()

    current, retired = before["wallets"]
    assert (current["state"], current["address"], current["retiredAt"]) == ("current", agent.new, None)
    assert (retired["state"], retired["address"], retired["walletId"]) == (
        "retired",
        agent.old,
        agent.old_wallet_id,
    )
    assert retired["retiredAt"] is not None
    assert retired["balances"] == [
        {"network": NETWORK, "balanceUsd": "3.00", "balanceAtomic": 3_000_000, "balanceError": None}
    ]
    assert current["balances"][0]["balanceAtomic"] == 0
    assert retired["sweeps"] == []

    sweep_with_gas(sqlite_db, chain, agent.setup.agent_id)
    after = wallet_command(sqlite_db, chain, "list", "--agent", agent.setup.agent_id, "--json").json()
    human = wallet_command(sqlite_db, chain, "list", "--agent", agent.setup.agent_id)

    current, retired = after["wallets"]
    assert current["balances"][0]["balanceUsd"] == "3.00"
    assert retired["balances"][0]["balanceUsd"] == "0.00"
    (sweep,) = retired["sweeps"]
    assert (sweep["status"], sweep["amountUsd"], sweep["to"]) == ("settled", "3.00", agent.new)
    assert f"retired  {agent.old}" in human.stdout
    assert "Base Sepolia: 0.00 USDC" in human.stdout
    assert (
        f"sweep {sweep['sweepId']} settled: 3.00 USDC on Base Sepolia, tx {sweep['txHash']}" in human.stdout
    )


def test_without_an_rpc_the_listing_says_the_balance_is_unknown(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)

    listed = run_cli(
        sqlite_db.url, "admin", "wallet", "list", "--agent", agent.setup.agent_id, "--json"
    ).json()

    assert [wallet["balances"] for wallet in listed["wallets"]] == [
        [{"network": NETWORK, "balanceUsd": None, "balanceAtomic": None, "balanceError": "no_rpc"}]
    ] * 2


def test_a_sweep_is_done_only_under_the_networks_confirmations(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)
    deep = {"PAYWARDEN_CONFIRMATIONS": json.dumps({NETWORK: 2})}

    # The wait covers the whole command (reading, signing, sending, mining), so it is long enough
    # for a loaded machine; the two confirmations never come while it waits (nothing else mines).
    shallow = sweep_with_gas(sqlite_db, chain, agent.setup.agent_id, "--wait", "6", "--json", env=deep)

    assert shallow.exit_code == 3  # not finished: run it again
    (outcome,) = json.loads(shallow.stdout)["sweeps"]
    assert outcome["outcome"] == "confirming"
    assert outcome["sweep"]["status"] == "submitted"
    assert chain.token.balance_of(agent.new) == agent.funded_atomic  # moved, not yet final
    for _ in range(2):
        chain.anvil.w3.provider.make_request("evm_mine", [])  # type: ignore[arg-type]

    deep_enough = sweep_with_gas(sqlite_db, chain, agent.setup.agent_id, "--json", env=deep)

    (outcome,) = deep_enough.json()["sweeps"]
    assert (outcome["outcome"], outcome["sweep"]["status"]) == ("settled", "settled")
    assert len(chain.transfers_out(agent.old)) == 1
