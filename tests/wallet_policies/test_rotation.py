"""Rotating a `cdp` agent's wallet (`paywarden admin wallet rotate --agent A`, no key given) moves it
to the next account of the organisation's CDP project, under the agent's next stable name and its
own policy compiled from the agent's; the old account is retired, listed, and its policy at CDP
becomes sweep-only (USDC to the agent's current wallet, nothing else). The account is made before
the transaction by a name derived from the database, so a run that made it and stopped before its
commit is followed by one that uses the same account; CDP out of reach writes nothing; a key given
still moves the agent to a local key."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from sqlmodel import col, select

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, Wallet
from server.signers.cdp_api import CdpAccounts
from server.wallet_policies.accounts import account_under_policy
from server.wallet_policies.service import compiled_for
from server.wallet_policies.sync import CdpReach, WalletPolicySync
from server.wallets.cdp import account_name_for
from server.wallets.replacement import ROTATED_EVENT
from tests.support.cdp import connected
from tests.support.cdp_standin import CdpStandIn, StoredPolicy, running_standin
from tests.support.chain import fresh_wallet
from tests.support.cli import CliResult, run_cli
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import AgentSetup, make_agent

# Every network's USDC the test settings configure: a retired account may sweep on any of them.
ASSETS = settings_for(database_url="sqlite:///unused.db", port=1).assets
USDC = sorted(address.lower() for address in ASSETS.values())


@pytest.fixture(scope="module", name="standin")
def fixture_standin() -> Iterator[tuple[CdpStandIn, str]]:
    with running_standin() as running:
        yield running


@pytest.fixture(name="agent")
def fixture_agent(db: Database, standin: tuple[CdpStandIn, str]) -> AgentSetup:
    """An agent whose wallet is its first account at the stand-in."""
    running, url = standin
    setup = make_agent(db, settings_for(database_url=db.url, port=1), allow_hosts=["api.example.com"])
    connected(db, api_url=url, agent=setup.agent_id, credentials=running.credentials)
    return setup


def _rotate(
    db: Database, url: str, agent_id: str, *args: str, env: dict[str, str] | None = None
) -> CliResult:
    return run_cli(
        db.url, "admin", "wallet", "rotate", "--agent", agent_id, *args, "--json",
        env={"PAYWARDEN_CDP_API_URL": url, **(env or {})},
    )  # fmt: skip


def _wallets(db: Database, agent_id: str) -> list[Wallet]:
    """The agent's wallets, oldest first."""
    with db.read() as session:
        return list(
            session.exec(select(Wallet).where(Wallet.agent_id == agent_id).order_by(col(Wallet.created_at)))
        )


def _accept(policy: StoredPolicy) -> dict[str, Any]:
    (accept,) = [rule for rule in policy.rules if rule["action"] == "accept"]
    return accept


def _is_sweep_only_to(policy: StoredPolicy, payee: str) -> bool:
    contract, fields = _accept(policy)["criteria"]
    return (
        contract["addresses"] == USDC
        and fields["conditions"] == [{"path": "to", "operator": "in", "addresses": [payee.lower()]}]
        and policy.description is not None
        and policy.description.startswith("Paywarden sweep")
    )


def test_a_cdp_wallet_rotates_to_the_next_account_and_the_old_one_becomes_sweep_only(
    db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin

    rotated = _rotate(db, url, agent.agent_id).json()

    old, new = _wallets(db, agent.agent_id)
    name = account_name_for(agent.org_id, agent.agent_id, generation=2)
    account = running.account_named(name)
    assert account is not None
    assert rotated == {
        "agentId": agent.agent_id,
        "walletId": new.id,
        "address": account.address,
        "mode": "cdp",
        "accountName": name,
        "retiredWalletId": old.id,
        "retiredAddress": old.address,
    }
    assert (new.mode, new.account_name, new.retired_at, new.sealed_secret) == ("cdp", name, None, None)
    assert old.retired_at is not None
    # The new account is under a policy of its own, compiled from the agent's, recorded on the row.
    assert new.cdp_policy_id is not None
    assert new.cdp_policy_id != old.cdp_policy_id
    assert account.policy_id == new.cdp_policy_id
    held = running.policies[new.cdp_policy_id]
    assert held.description is not None
    assert held.description.startswith("Paywarden policy")
    assert _accept(held)["criteria"][1]["conditions"][0]["path"] == "value"
    # The retired account's own policy now lets it sign only its sweep to the new account.
    assert old.cdp_policy_id is not None
    assert _is_sweep_only_to(running.policies[old.cdp_policy_id], new.address)
    assert old.cdp_policy_error is None
    with db.read() as session:
        (event,) = session.exec(
            select(AuditEvent).where(AuditEvent.org_id == agent.org_id, AuditEvent.type == ROTATED_EVENT)
        ).all()
    assert event.data["accountName"] == name
    assert (event.data["mode"], event.data["retiredMode"]) == ("cdp", "cdp")


def test_a_run_that_made_the_account_and_stopped_is_followed_by_one_that_uses_it(
    db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    name = account_name_for(agent.org_id, agent.agent_id, generation=2)
    # What an earlier run did at CDP before it stopped, short of its commit.
    with db.read() as session:
        compiled = compiled_for(session, OPERATOR, agent.agent_id, usdc_by_network=ASSETS)
    address, sent = anyio.run(
        lambda: account_under_policy(
            CdpAccounts(running.credentials, api_url=url),
            agent_id=agent.agent_id,
            name=name,
            policy_id=None,
            compiled=compiled,
        )
    )
    accounts, policies = len(running.accounts), len(running.policies)

    rotated = _rotate(db, url, agent.agent_id).json()

    assert (rotated["address"], rotated["accountName"]) == (address, name)
    assert len(running.accounts) == accounts  # no second account
    assert len(running.policies) == policies  # and no second policy: the one it is under, kept
    assert _wallets(db, agent.agent_id)[-1].cdp_policy_id == sent.policy_id


def test_a_second_rotation_takes_the_third_name_and_every_retired_account_sweeps_to_the_newest(
    db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin

    _rotate(db, url, agent.agent_id).json()
    third = _rotate(db, url, agent.agent_id).json()

    first, second, newest = _wallets(db, agent.agent_id)
    assert third["accountName"] == account_name_for(agent.org_id, agent.agent_id, generation=3)
    for retired in (first, second):
        assert retired.cdp_policy_id is not None
        assert _is_sweep_only_to(running.policies[retired.cdp_policy_id], newest.address)


def test_cdp_out_of_reach_rotates_nothing(
    db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    before = [(w.id, w.retired_at) for w in _wallets(db, agent.agent_id)]

    running.down = True
    try:
        result = _rotate(db, url, agent.agent_id)
    finally:
        running.down = False

    assert result.exit_code != 0
    assert "cdp_unavailable" in result.stderr + result.stdout
    assert [(w.id, w.retired_at) for w in _wallets(db, agent.agent_id)] == before


def test_a_key_given_moves_a_cdp_agent_to_it_and_the_job_makes_the_old_account_sweep_only(
    db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    address, key = fresh_wallet()
    old = _wallets(db, agent.agent_id)[0]
    assert old.cdp_policy_id is not None
    # CDP does not take the sweep-only policy right after the rotation: the wallet says so.
    running.down = True
    try:
        rotated = _rotate(db, url, agent.agent_id, "--from-env", "NEW_KEY", env={"NEW_KEY": key}).json()
    finally:
        running.down = False
    assert (rotated["mode"], rotated["address"], rotated["accountName"]) == ("local_key", address, None)
    retired = _wallets(db, agent.agent_id)[0]
    assert retired.cdp_policy_error == "cdp_unavailable"
    assert not _is_sweep_only_to(running.policies[old.cdp_policy_id], address)

    # The wallet policy job sends it once its retry is due, and then has nothing more to send.
    settings = settings_for(database_url=db.url, port=1)
    reach = CdpReach(master=settings.master, api_url=url, usdc_by_network=settings.assets)
    job = WalletPolicySync(db=db, clock=SystemClock(), reach=reach)
    with db.write() as session:
        row = session.get(Wallet, retired.id)
        assert row is not None
        row.cdp_policy_retry_at = None
        session.add(row)
    assert anyio.run(job.run_once) == 1
    assert anyio.run(job.run_once) == 0

    assert _is_sweep_only_to(running.policies[old.cdp_policy_id], address)
    assert _wallets(db, agent.agent_id)[0].cdp_policy_error is None
