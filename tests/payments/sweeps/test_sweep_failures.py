"""A sweep that is interrupted, raced or tampered with still moves a retired wallet's balance at most
once, and only to the agent's current wallet, on anvil:

- the RPC down when the transaction is sent, and the process killed (SIGKILL) after the signature
  was recorded, after the transaction was recorded, and after it was sent: running the command
  again finishes the same sweep, with the same transaction where one was recorded, and the chain
  shows one transfer; a transaction the node refuses (a gas account without ETH) is replaced by
  the next run's;
- two sweeps at once, in two threads and in two processes, on SQLite and PostgreSQL: one transfer;
- a sweep whose payee is not the agent's current wallet (its row altered, or the agent rotated
  again since it was authorised) is refused by the signer and audited; nothing moves;
- a payment from the retired wallet that may still settle holds the sweep back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from sqlmodel import select

from server.chain.service import ChainService
from server.chain.submission import GasPayer
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent, WalletSweep
from server.payments import ledger
from server.payments.sweeps import records
from server.payments.sweeps.sweeper import Sweeper, SweepOutcome
from server.signers.errors import SignRefused
from server.tenancy.service import get_agent
from server.vocabulary import IntentStatus, SweepStatus
from server.wallets.service import parse_private_key
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.cli import command_environ, finish, start_paywarden
from tests.support.ledger import PAYEE, facts, reserve_now
from tests.support.principals import OPERATOR
from tests.support.races import at_once
from tests.support.rpc_outage import RpcOutage
from tests.support.sweeps import (
    NETWORK,
    SweepChain,
    funded_agent,
    gas_account,
    rotate,
    rotated_agent,
    wallet_command,
)
from tests.support.tenants import master_of, pin_payee

pytestmark = [pytest.mark.chain, pytest.mark.anyio]

GAS = "SWEEP_GAS_KEY"
# The installed command, killed (SIGKILL, by itself) as it calls a step of ChainService for the
# n-th time: `judge:3` is the chain's third look, the one after the transaction was sent.
KILLED_AT = """
import os, signal, sys
from server.chain.service import ChainService
method, _, nth = sys.argv[1].partition(":")
original, calls = getattr(ChainService, method), []
def killed(*args, **kwargs):
    calls.append(1)
    if len(calls) >= int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)
setattr(ChainService, method, killed)
from server.cli import main
sys.argv = ["paywarden", *sys.argv[2:]]
main()
"""


@pytest.fixture
def chain(anvil: Anvil, test_usdc: TestToken) -> SweepChain:
    return SweepChain(anvil, test_usdc, anvil.rpc_url)


def _sweeps(db: Database, agent_id: str) -> list[WalletSweep]:
    with db.read() as session:
        return sorted(
            session.exec(select(WalletSweep).where(WalletSweep.agent_id == agent_id)),
            key=lambda row: row.created_at,
        )


def _sweep_args(agent_id: str) -> list[str]:
    return ["admin", "wallet", "sweep", "--agent", agent_id, "--gas-from-env", GAS, "--json"]


def test_the_rpc_down_when_sending_leaves_a_sweep_the_next_run_sends_again(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)
    gas = {GAS: gas_account(chain.anvil)}

    with RpcOutage(chain.rpc_url, down_for=frozenset({"eth_sendRawTransaction"})) as outage:
        down = wallet_command(
            sqlite_db, chain.through(outage.url), *_sweep_args(agent.setup.agent_id)[2:], env=gas
        )

    assert down.exit_code == 1
    assert down.stderr.startswith("error: chain_unavailable: The network's RPC did not answer.")
    assert outage.refused["eth_sendRawTransaction"] == 1
    (recorded,) = _sweeps(sqlite_db, agent.setup.agent_id)
    assert recorded.status == SweepStatus.SUBMITTED
    assert chain.token.balance_of(agent.old) == agent.funded_atomic

    again = wallet_command(sqlite_db, chain, *_sweep_args(agent.setup.agent_id)[2:], env=gas)

    (outcome,) = again.json()["sweeps"]
    assert outcome["outcome"] == "settled"
    assert outcome["sweep"]["sweepId"] == recorded.id
    assert outcome["sweep"]["txHash"] == recorded.tx_hash  # the transaction recorded, sent again
    assert chain.transfers_out(agent.old) == [recorded.tx_hash]
    assert chain.token.balance_of(agent.new) == agent.funded_atomic


def test_a_gas_account_without_eth_moves_nothing_and_a_funded_one_replaces_its_transaction(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)
    _, penniless = fresh_wallet()  # holds no ETH: the node will not take its transaction

    refused = wallet_command(sqlite_db, chain, *_sweep_args(agent.setup.agent_id)[2:], env={GAS: penniless})

    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: sweep_transaction_refused: The network refused the transaction")
    (recorded,) = _sweeps(sqlite_db, agent.setup.agent_id)
    assert recorded.status == SweepStatus.SUBMITTED
    assert chain.token.balance_of(agent.old) == agent.funded_atomic

    funded = wallet_command(
        sqlite_db, chain, *_sweep_args(agent.setup.agent_id)[2:], env={GAS: gas_account(chain.anvil)}
    )

    (outcome,) = funded.json()["sweeps"]
    assert (outcome["outcome"], outcome["sweep"]["sweepId"]) == ("settled", recorded.id)
    assert outcome["sweep"]["txHash"] != recorded.tx_hash  # the refused one, replaced
    assert chain.transfers_out(agent.old) == [outcome["sweep"]["txHash"]]
    assert chain.token.balance_of(agent.new) == agent.funded_atomic


@pytest.mark.parametrize(
    ("step", "left"),
    [
        pytest.param("sign_call", SweepStatus.SIGNED, id="after-the-signature-was-recorded"),
        pytest.param("send_transaction", SweepStatus.SUBMITTED, id="after-the-transaction-was-recorded"),
        pytest.param("judge:3", SweepStatus.SUBMITTED, id="after-the-transaction-was-sent"),
    ],
)
def test_a_process_killed_mid_sweep_leaves_a_state_the_next_run_finishes_with_one_transfer(
    sqlite_db: Database, chain: SweepChain, tmp_path: Path, step: str, left: SweepStatus
) -> None:
    agent = rotated_agent(sqlite_db, chain)
    environ = command_environ(
        database_url=sqlite_db.url, env={**chain.environ(), GAS: gas_account(chain.anvil)}
    )

    killed = subprocess.run(
        [sys.executable, "-c", KILLED_AT, step, *_sweep_args(agent.setup.agent_id)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert killed.returncode == -9, killed.stderr
    (recorded,) = _sweeps(sqlite_db, agent.setup.agent_id)
    assert recorded.status == left
    moved = chain.transfers_out(agent.old)
    assert moved == ([recorded.tx_hash] if step == "judge:3" else [])

    again = wallet_command(sqlite_db, chain, *_sweep_args(agent.setup.agent_id)[2:], env={GAS: environ[GAS]})

    (outcome,) = again.json()["sweeps"]
    assert (outcome["outcome"], outcome["sweep"]["sweepId"]) == ("settled", recorded.id)
    if recorded.tx_hash is not None:
        assert outcome["sweep"]["txHash"] == recorded.tx_hash
    assert chain.transfers_out(agent.old) == [outcome["sweep"]["txHash"]]
    assert (chain.token.balance_of(agent.old), chain.token.balance_of(agent.new)) == (0, agent.funded_atomic)


def test_two_sweeps_in_two_threads_move_the_balance_once(db: Database, chain: SweepChain) -> None:
    agent = rotated_agent(db, chain)
    settings = chain.settings(db)
    payer = GasPayer(parse_private_key(gas_account(chain.anvil)))

    async def sweep_once() -> list[SweepOutcome]:
        rpc = ChainService(settings.rpc_urls, confirmations=settings.confirmations)
        sweeper = Sweeper(
            db=db, chain=rpc, settings=settings, master=master_of(settings), clock=SystemClock()
        )
        try:
            return await sweeper.sweep(OPERATOR, agent=agent.setup.agent_id, gas_payer=payer, wait_seconds=30)
        finally:
            await rpc.aclose()

    outcomes = at_once(*[lambda: anyio.run(sweep_once)] * 2)

    assert all(isinstance(found, list) for found in outcomes), outcomes
    seen = sorted(item.outcome for found in outcomes if isinstance(found, list) for item in found)
    assert seen in (["settled", "settled"], ["nothing_to_sweep", "settled"])
    (sweep,) = _sweeps(db, agent.setup.agent_id)
    assert sweep.status == SweepStatus.SETTLED
    assert chain.transfers_out(agent.old) == [sweep.tx_hash]
    assert (chain.token.balance_of(agent.old), chain.token.balance_of(agent.new)) == (0, agent.funded_atomic)


def test_two_sweep_processes_at_once_move_the_balance_once(
    db: Database, chain: SweepChain, tmp_path: Path
) -> None:
    agent = rotated_agent(db, chain)
    env = {**chain.environ(), GAS: gas_account(chain.anvil)}

    running = [
        start_paywarden(*_sweep_args(agent.setup.agent_id), cwd=tmp_path, database_url=db.url, env=env)
        for _ in range(2)
    ]
    done = [finish(process) for process in running]

    assert [run.code for run in done] == [0, 0], [run.stderr for run in done]
    seen = sorted(item["outcome"] for run in done for item in run.json()["sweeps"])
    assert seen in (["settled", "settled"], ["nothing_to_sweep", "settled"])
    (sweep,) = _sweeps(db, agent.setup.agent_id)
    assert sweep.status == SweepStatus.SETTLED
    assert chain.transfers_out(agent.old) == [sweep.tx_hash]
    assert (chain.token.balance_of(agent.old), chain.token.balance_of(agent.new)) == (0, agent.funded_atomic)


def _authorised(db: Database, chain: SweepChain, agent_id: str, wallet_id: str, amount: int) -> WalletSweep:
    with db.write() as session:
        return records.authorise_sweep(
            session,
            OPERATOR,
            agent_id=agent_id,
            wallet_id=wallet_id,
            network=NETWORK,
            asset=chain.token.address,
            amount_atomic=amount,
            now=SystemClock().now(),
        )


def test_a_sweep_whose_payee_was_altered_is_refused_by_the_signer(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)
    thief = fresh_wallet()[0]
    sweep = _authorised(sqlite_db, chain, agent.setup.agent_id, agent.old_wallet_id, agent.funded_atomic)
    with sqlite_db.write() as session:
        row = session.get(WalletSweep, sweep.id)
        assert row is not None
        row.pay_to = thief  # what someone with the database's credentials could do
        session.add(row)

    refused = wallet_command(
        sqlite_db, chain, *_sweep_args(agent.setup.agent_id)[2:], env={GAS: gas_account(chain.anvil)}
    )

    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: sign_refused:")
    assert "(sweep_not_to_current_wallet)" in refused.stderr
    (failed,) = _sweeps(sqlite_db, agent.setup.agent_id)
    assert (failed.status, failed.failure_code, failed.signature) == (
        SweepStatus.FAILED,
        "sign_refused",
        None,
    )
    with sqlite_db.read() as session:
        (event,) = session.exec(
            select(AuditEvent).where(
                AuditEvent.org_id == agent.setup.org_id, AuditEvent.type == "wallet.sign_refused"
            )
        ).all()
    assert (event.subject_id, event.data["reason"]) == (sweep.id, "sweep_not_to_current_wallet")
    assert chain.token.balance_of(thief) == 0
    assert chain.transfers_out(agent.old) == []


def test_a_rotation_after_a_sweep_was_authorised_refuses_it_and_the_next_sweep_pays_the_newest_wallet(
    sqlite_db: Database, chain: SweepChain
) -> None:
    agent = rotated_agent(sqlite_db, chain)
    _authorised(sqlite_db, chain, agent.setup.agent_id, agent.old_wallet_id, agent.funded_atomic)
    newest = wallet_command(sqlite_db, chain, "rotate", "--agent", agent.setup.agent_id, "--json").json()[
        "address"
    ]
    gas = {GAS: gas_account(chain.anvil)}

    settings = chain.settings(sqlite_db)
    rpc = ChainService(settings.rpc_urls)
    sweeper = Sweeper(
        db=sqlite_db, chain=rpc, settings=settings, master=master_of(settings), clock=SystemClock()
    )

    with pytest.raises(SignRefused) as refused:
        anyio.run(lambda: sweeper.sweep(OPERATOR, agent=agent.setup.agent_id, wallet=agent.old_wallet_id))
    after = wallet_command(
        sqlite_db, chain, *_sweep_args(agent.setup.agent_id)[2:], "--wallet", agent.old_wallet_id, env=gas
    )

    assert refused.value.reason == "sweep_not_to_current_wallet"
    (outcome,) = after.json()["sweeps"]
    assert (outcome["outcome"], outcome["sweep"]["to"]) == ("settled", newest)
    assert chain.token.balance_of(newest) == agent.funded_atomic
    assert chain.token.balance_of(agent.new) == 0
    assert [row.status for row in _sweeps(sqlite_db, agent.setup.agent_id)] == ["failed", "settled"]


def test_a_payment_from_the_retired_wallet_that_may_still_settle_holds_the_sweep_back(
    sqlite_db: Database, chain: SweepChain
) -> None:
    funded = funded_agent(sqlite_db, chain)
    # Reserved and sent from the wallet just before it was rotated away: its seller may still settle it.
    pin_payee(sqlite_db, url="https://127.0.0.1/v1/search", pay_to=PAYEE)
    now = SystemClock().now()
    reserved = reserve_now(
        sqlite_db, funded.setup.agent_id, facts("key-in-flight", host="127.0.0.1", payer=funded.address), now
    )
    assert reserved.intent is not None
    with sqlite_db.write() as session:
        agent = get_agent(session, OPERATOR, funded.setup.agent_id)
        ledger.submit(session, OPERATOR, agent=agent, intent_id=reserved.intent.id, now=now)
    agent_ = rotate(sqlite_db, chain, funded)

    held = wallet_command(
        sqlite_db, chain, *_sweep_args(agent_.setup.agent_id)[2:], env={GAS: gas_account(chain.anvil)}
    )

    assert held.exit_code == 1
    assert held.stderr.startswith("error: payments_still_open: Payments from that wallet may still settle")
    assert "The last can settle until " in held.stderr
    assert _sweeps(sqlite_db, agent_.setup.agent_id) == []
    assert chain.token.balance_of(agent_.old) == agent_.funded_atomic
    with sqlite_db.read() as session:
        intent = session.get(PaymentIntent, reserved.intent.id)
    assert intent is not None
    assert intent.status == IntentStatus.SUBMITTED  # asked about on-chain, and still open
