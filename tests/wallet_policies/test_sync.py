"""The wallet policy job keeps each `cdp` wallet's policy at CDP in step with its agent's: a new
policy version or a catalog change that alters pinned payees is sent by the next pass, nothing is
sent when nothing changed, a failure is recorded on the wallet, audited once and tried again later
(never dropped), and a policy deleted at CDP is made again. On SQLite and PostgreSQL: what is due
is a query over every organisation's wallets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest
from sqlmodel import select

from server.catalog.service import EntryChanges, edit_entry
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import AuditEvent, Wallet
from server.policy.service import PolicyChanges
from server.wallet_policies.accounts import provision_cdp_account
from server.wallet_policies.sync import CdpReach, WalletPolicySync
from server.wallets.cdp import any_cdp_wallet
from tests.support.cdp_standin import CdpStandIn, running_standin
from tests.support.clocks import frozen_clock, written
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.tenants import change_policy, make_agent, pin_payee

pytestmark = pytest.mark.anyio

SELLER = "https://api.example.com/v1/report"
PAYEE = "0x209693bc6afc0c5328ba36faf03c514ef312287c"
NEW_PAYEE = "0x5555555555555555555555555555555555555555"
START = written(2026, 12, 4, 12)


@dataclass
class World:
    db: Database
    standin: CdpStandIn
    clock: FrozenClock
    job: WalletPolicySync
    agent_id: str
    org_id: str

    def wallet(self) -> Wallet:
        with self.db.read() as session:
            return session.exec(
                select(Wallet).where(Wallet.agent_id == self.agent_id, Wallet.retired_at == None)  # noqa: E711
            ).one()

    def held_rules(self) -> list[dict[str, object]]:
        policy_id = self.wallet().cdp_policy_id
        assert policy_id is not None
        return self.standin.policies[policy_id].rules

    def accept_conditions(self) -> list[dict[str, object]]:
        (accept,) = [rule for rule in self.held_rules() if rule["action"] == "accept"]
        criteria = accept["criteria"]
        assert isinstance(criteria, list)
        conditions = criteria[1]["conditions"]
        assert isinstance(conditions, list)
        return conditions

    def events(self, kind: str) -> list[AuditEvent]:
        with self.db.read() as session:
            return list(
                session.exec(
                    select(AuditEvent).where(AuditEvent.org_id == self.org_id, AuditEvent.type == kind)
                ).all()
            )

    def puts(self) -> int:
        return self.standin.count("PUT", r"/policy-engine/policies/")


@pytest.fixture(name="world")
async def fixture_world(db: Database) -> AsyncIterator[World]:
    settings = settings_for(database_url=db.url, port=1)
    clock = frozen_clock(START)
    pin_payee(db, url=SELLER, pay_to=PAYEE, clock=clock)
    setup = make_agent(db, settings, allow_hosts=["api.example.com"], clock=clock)
    change_policy(db, setup.agent_id, PolicyChanges(verified_sellers_only=True), clock=clock)
    with running_standin() as (standin, url):
        reach = CdpReach(master=settings.master, api_url=url, usdc_by_network=settings.assets)
        await provision_cdp_account(
            db,
            principal=OPERATOR,
            agent_ref=setup.agent_id,
            master=settings.master,
            api_url=url,
            usdc_by_network=settings.assets,
            clock=clock,
            credentials=standin.credentials,
        )
        yield World(
            db,
            standin,
            clock,
            WalletPolicySync(db=db, clock=clock, reach=reach),
            setup.agent_id,
            setup.org_id,
        )


async def test_a_new_policy_version_is_sent_by_the_next_pass_and_only_once(world: World) -> None:
    assert {"path": "value", "operator": "<=", "value": "1000000"} in world.accept_conditions()
    version = change_policy(
        world.db, world.agent_id, PolicyChanges(max_usd_per_tx=Decimal("0.25")), clock=world.clock
    )

    assert await world.job.run_once() == 1
    assert await world.job.run_once() == 0

    assert {"path": "value", "operator": "<=", "value": "250000"} in world.accept_conditions()
    assert world.puts() == 1
    wallet = world.wallet()
    assert (wallet.cdp_policy_version, wallet.cdp_policy_error, wallet.cdp_policy_failures) == (
        version,
        None,
        0,
    )
    (updated,) = world.events("wallet.cdp_policy_updated")
    assert updated.data["policyVersion"] == version


async def test_a_catalog_change_of_pinned_payees_is_sent_though_no_policy_changed(world: World) -> None:
    assert {"path": "to", "operator": "in", "addresses": [PAYEE]} in world.accept_conditions()
    with world.db.write() as session:
        edit_entry(session, "api.example.com", changes=EntryChanges(pay_to=[NEW_PAYEE]))

    assert await world.job.run_once() == 1

    assert {"path": "to", "operator": "in", "addresses": [NEW_PAYEE]} in world.accept_conditions()


async def test_a_server_knows_at_start_whether_any_organisation_has_a_cdp_wallet(world: World) -> None:
    with world.db.read() as session:
        assert any_cdp_wallet(session)
    with world.db.write() as session:
        for wallet in session.exec(select(Wallet)).all():
            wallet.retired_at = world.clock.now()
            session.add(wallet)
    with world.db.read() as session:
        assert not any_cdp_wallet(session)


async def test_a_version_that_compiles_to_the_same_document_is_recorded_without_asking_cdp(
    world: World,
) -> None:
    version = change_policy(
        world.db, world.agent_id, PolicyChanges(step_up_threshold_usd=Decimal("0.05")), clock=world.clock
    )

    assert await world.job.run_once() == 0

    assert world.puts() == 0
    assert world.wallet().cdp_policy_version == version


async def test_a_failure_is_recorded_audited_once_and_tried_again_later_until_cdp_takes_it(
    world: World,
) -> None:
    world.standin.down = True
    change_policy(world.db, world.agent_id, PolicyChanges(max_usd_per_tx=Decimal("0.25")), clock=world.clock)

    assert await world.job.run_once() == 1
    failed = world.wallet()
    assert (failed.cdp_policy_error, failed.cdp_policy_failures) == ("cdp_unavailable", 1)
    assert failed.cdp_policy_retry_at == world.clock.now() + timedelta(seconds=15)
    assert await world.job.run_once() == 0  # not before its time
    world.clock.advance(16)
    assert await world.job.run_once() == 1
    again = world.wallet()
    assert again.cdp_policy_failures == 2
    assert again.cdp_policy_retry_at == world.clock.now() + timedelta(seconds=30)
    (audited,) = world.events("wallet.cdp_policy_sync_failed")  # one event per streak, not per try
    assert (audited.data["error"], audited.data["cdpPolicyId"]) == ("cdp_unavailable", failed.cdp_policy_id)

    world.standin.down = False
    world.clock.advance(31)
    assert await world.job.run_once() == 1
    mended = world.wallet()
    assert (mended.cdp_policy_error, mended.cdp_policy_failures, mended.cdp_policy_retry_at) == (
        None,
        0,
        None,
    )
    assert {"path": "value", "operator": "<=", "value": "250000"} in world.accept_conditions()


async def test_a_policy_deleted_at_cdp_is_made_again_and_the_account_put_under_it(world: World) -> None:
    deleted = world.wallet().cdp_policy_id
    assert deleted is not None
    del world.standin.policies[deleted]
    for account in world.standin.accounts.values():
        account.policy_id = None
    change_policy(world.db, world.agent_id, PolicyChanges(max_usd_per_tx=Decimal("0.25")), clock=world.clock)

    assert await world.job.run_once() == 1

    wallet = world.wallet()
    assert wallet.cdp_policy_id not in (None, deleted)
    (account,) = world.standin.accounts.values()
    assert account.policy_id == wallet.cdp_policy_id
    assert {"path": "value", "operator": "<=", "value": "250000"} in world.accept_conditions()
