"""Sweeping a retired `cdp` wallet on anvil: the account at the CDP stand-in signs the sweep through
CDP, whose sweep-only policy for the retired account lets it send USDC to the agent's current
wallet and nothing else, and the whole balance moves in one transfer. When CDP's policy refuses
(the retired account is still under the agent's payment policy), the sweep fails closed with
`sweep_refused_at_cdp`: nothing signed, nothing moved, the sweep closed; once the sweep-only
policy is sent, the next run sweeps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import AuditEvent, Wallet, WalletSweep
from tests.support.cdp import connect_cdp
from tests.support.cdp_standin import CdpStandIn, StoredPolicy, running_standin
from tests.support.chain import Anvil, TestToken, fresh_wallet
from tests.support.sweeps import SweepChain, sweep_with_gas, wallet_command
from tests.support.tenants import make_agent

pytestmark = pytest.mark.chain

FUNDED = 4_321_000


@pytest.fixture(scope="module", name="standin")
def fixture_standin() -> Iterator[tuple[CdpStandIn, str]]:
    with running_standin() as running:
        yield running


@pytest.fixture
def chain(anvil: Anvil, test_usdc: TestToken) -> SweepChain:
    return SweepChain(anvil, test_usdc, anvil.rpc_url)


def _rotated_cdp_agent(
    db: Database, chain: SweepChain, standin: tuple[CdpStandIn, str], *, cdp_down_at_rotation: bool = False
) -> tuple[str, Wallet, dict[str, str]]:
    """A cdp agent holding FUNDED, rotated to its next CDP account (its id, the retired wallet and
    the commands' environment)."""
    running, url = standin
    env = {"PAYWARDEN_CDP_API_URL": url}
    setup = make_agent(db, chain.settings(db), allow_hosts=["127.0.0.1"])
    first = connect_cdp(
        db, api_url=url, agent=setup.agent_id, credentials=running.credentials, env=chain.environ()
    ).json()
    chain.token.mint(first["address"], FUNDED)
    running.down = cdp_down_at_rotation
    try:
        # Down, CDP makes no account: a key given moves the agent to a local key instead.
        key_args = ("--from-env", "NEXT_KEY") if cdp_down_at_rotation else ()
        key_env = {"NEXT_KEY": fresh_wallet()[1]} if cdp_down_at_rotation else {}
        wallet_command(
            db, chain, "rotate", "--agent", setup.agent_id, *key_args, "--json", env={**env, **key_env}
        ).json()
    finally:
        running.down = False
    with db.read() as session:
        retired = session.exec(
            select(Wallet).where(Wallet.agent_id == setup.agent_id, Wallet.address == first["address"])
        ).one()
    return setup.agent_id, retired, env


def _current(db: Database, agent_id: str) -> Wallet:
    with db.read() as session:
        return session.exec(
            select(Wallet).where(Wallet.agent_id == agent_id, Wallet.retired_at == None)  # noqa: E711
        ).one()


def test_a_retired_cdp_account_is_swept_through_cdp_in_one_transfer(
    sqlite_db: Database, chain: SweepChain, standin: tuple[CdpStandIn, str]
) -> None:
    running, _ = standin
    agent_id, retired, env = _rotated_cdp_agent(sqlite_db, chain, standin)
    current = _current(sqlite_db, agent_id)
    signed_before = running.count("POST", rf"/accounts/{retired.address}/sign/typed-data$")

    done = sweep_with_gas(sqlite_db, chain, agent_id, "--json", env=env)

    (outcome,) = done.json()["sweeps"]
    assert outcome["outcome"] == "settled"
    sweep = outcome["sweep"]
    assert (sweep["from"], sweep["to"], sweep["amountAtomic"]) == (retired.address, current.address, FUNDED)
    assert (chain.token.balance_of(retired.address), chain.token.balance_of(current.address)) == (0, FUNDED)
    assert chain.transfers_out(retired.address) == [sweep["txHash"]]
    # CDP signed it, once, for the retired account.
    assert running.count("POST", rf"/accounts/{retired.address}/sign/typed-data$") == signed_before + 1


def test_a_sweep_cdps_policy_refuses_fails_closed_and_goes_through_once_the_policy_is_sent(
    sqlite_db: Database, chain: SweepChain, standin: tuple[CdpStandIn, str]
) -> None:
    running, _ = standin
    # CDP was away at the rotation: the retired account is still under the agent's payment policy,
    # which allows at most 1.00 a payment (the balance is more).
    agent_id, retired, env = _rotated_cdp_agent(sqlite_db, chain, standin, cdp_down_at_rotation=True)
    assert retired.cdp_policy_id is not None
    held: StoredPolicy = running.policies[retired.cdp_policy_id]
    assert held.description is not None
    assert held.description.startswith("Paywarden policy")

    refused = sweep_with_gas(sqlite_db, chain, agent_id, env=env)

    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: sweep_refused_at_cdp:")
    assert chain.token.balance_of(retired.address) == FUNDED
    assert chain.transfers_out(retired.address) == []
    with sqlite_db.read() as session:
        (row,) = session.exec(select(WalletSweep).where(WalletSweep.agent_id == agent_id)).all()
        events = session.exec(select(AuditEvent).where(AuditEvent.subject_id == row.id)).all()
    assert (row.status, row.failure_code, row.signature, row.tx_hash) == (
        "failed",
        "sweep_refused_at_cdp",
        None,
        None,
    )
    assert "wallet.cdp_policy_refused" in {event.type for event in events}
    assert "wallet.sweep_signed" not in {event.type for event in events}

    synced = wallet_command(sqlite_db, chain, "cdp-policy", "sync", "--agent", agent_id, "--json", env=env)
    (sent,) = synced.json()["retired"]
    assert (sent["walletId"], sent["lastError"]) == (retired.id, None)
    done = sweep_with_gas(sqlite_db, chain, agent_id, "--json", env=env)

    (outcome,) = done.json()["sweeps"]
    assert outcome["outcome"] == "settled"
    assert chain.token.balance_of(_current(sqlite_db, agent_id).address) == FUNDED
    assert len(chain.transfers_out(retired.address)) == 1
