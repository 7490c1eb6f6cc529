"""Rotating an agent's wallet, on SQLite and PostgreSQL: a new wallet (a key made and sealed here,
or one given) becomes the agent's in one audited transaction, the old one is retired and kept;
two rotations at once leave exactly one current wallet; and a payment prepared with the wallet a
rotation just retired is refused at its reservation, while one on the new wallet is authorised."""

from __future__ import annotations

import pytest
from eth_account import Account
from sqlmodel import col, select

from server.kit.clock import SystemClock
from server.kit.db import Database
from server.models import AuditEvent, PaymentIntent, Wallet
from server.payments.errors import WalletChanged
from server.settings import Settings
from server.signers.errors import SignerError
from server.tenancy.service import get_agent
from server.vocabulary import WalletMode
from server.wallets.replacement import (
    ROTATED_EVENT,
    NothingToRotate,
    Rotated,
    WalletUnchanged,
    rotate_wallet,
)
from server.wallets.service import NewWallet, install_wallet, new_local_wallet, parse_private_key, signer_for
from tests.support.chain import fresh_wallet
from tests.support.ledger import facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.principals import OPERATOR
from tests.support.races import at_once
from tests.support.tenants import AgentSetup, make_agent, master_of

OLD_KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
OLD_ADDRESS = str(Account.from_key(OLD_KEY).address)


@pytest.fixture
def settings(db: Database) -> Settings:
    return settings_for(database_url=db.url, port=8402)


def _agent(db: Database, settings: Settings, *, wallet_key: str | None = OLD_KEY) -> AgentSetup:
    return make_agent(db, settings, allow_hosts=["api.example.com"], wallet_key=wallet_key)


def _rotate(db: Database, settings: Settings, agent_id: str, *, key: str | None = None) -> Rotated:
    master = master_of(settings)
    with db.write() as session:
        agent = get_agent(session, OPERATOR, agent_id)
        new = new_local_wallet(master, private_key=parse_private_key(key) if key else None)
        return rotate_wallet(
            session, master=master, agent=agent, new=new, actor="cli:test", now=SystemClock().now()
        )


def _wallets(db: Database, agent_id: str) -> list[Wallet]:
    with db.read() as session:
        return list(
            session.exec(select(Wallet).where(Wallet.agent_id == agent_id).order_by(col(Wallet.created_at)))
        )


def test_a_rotation_makes_a_sealed_key_and_retires_the_old_wallet(db: Database, settings: Settings) -> None:
    setup = _agent(db, settings)

    rotated = _rotate(db, settings, setup.agent_id)

    old, new = _wallets(db, setup.agent_id)
    assert (old.address, old.retired_at is not None) == (OLD_ADDRESS, True)
    assert (new.id, new.retired_at, new.mode) == (rotated.wallet.id, None, WalletMode.LOCAL_KEY)
    assert new.address != OLD_ADDRESS
    assert new.sealed_secret is not None
    assert new.sealed_key_id == master_of(settings).key_id
    # The key made for it opens only in the signer, and is the key of the address recorded.
    signer = signer_for(new, master_of(settings), usdc_by_network=settings.assets, clock=SystemClock())
    assert signer.address == new.address
    with db.read() as session:
        (event,) = session.exec(
            select(AuditEvent).where(AuditEvent.org_id == setup.org_id, AuditEvent.type == ROTATED_EVENT)
        ).all()
    assert event.subject_id == new.id
    assert event.data == {
        "address": new.address,
        "mode": "local_key",
        "retiredWallet": old.id,
        "retiredAddress": OLD_ADDRESS,
        "retiredMode": "local_key",
    }
    assert "sealed" not in str(event.data)


def test_a_rotation_to_a_key_given_uses_that_key(db: Database, settings: Settings) -> None:
    setup = _agent(db, settings)
    address, key = fresh_wallet()

    rotated = _rotate(db, settings, setup.agent_id, key=key)

    assert rotated.wallet.address == address
    assert rotated.retired.address == OLD_ADDRESS


def test_the_current_key_again_or_no_wallet_at_all_rotates_nothing(db: Database, settings: Settings) -> None:
    setup = _agent(db, settings)
    with pytest.raises(WalletUnchanged):
        _rotate(db, settings, setup.agent_id, key=OLD_KEY)
    assert [(w.address, w.retired_at) for w in _wallets(db, setup.agent_id)] == [(OLD_ADDRESS, None)]

    bare = _agent(db, settings, wallet_key=None)
    new = NewWallet("wallet_x", WalletMode.LOCAL_KEY, fresh_wallet()[0], None, None)
    with db.write() as session:
        agent = get_agent(session, OPERATOR, bare.agent_id)
        with pytest.raises(NothingToRotate):
            rotate_wallet(
                session,
                master=master_of(settings),
                agent=agent,
                new=new,
                actor="cli:test",
                now=SystemClock().now(),
            )
    assert _wallets(db, bare.agent_id) == []


def test_a_cdp_wallet_installed_signs_only_through_its_organisations_cdp(
    db: Database, settings: Settings
) -> None:
    # Its rotation to the next CDP account: tests/wallet_policies/test_rotation.py.
    setup = _agent(db, settings, wallet_key=None)
    with db.write() as session:
        agent = get_agent(session, OPERATOR, setup.agent_id)
        account = NewWallet(
            "wallet_cdp", WalletMode.CDP, fresh_wallet()[0], None, None, account_name="pw-agent"
        )
        cdp = install_wallet(
            session, master=master_of(settings), agent=agent, new=account, now=SystemClock().now()
        )

    assert (cdp.wallet.mode, cdp.wallet.account_name, cdp.wallet.sealed_secret) == ("cdp", "pw-agent", None)
    with pytest.raises(SignerError):
        signer_for(cdp.wallet, master_of(settings), usdc_by_network=settings.assets, clock=SystemClock())


def test_two_rotations_at_once_leave_one_current_wallet(db: Database, settings: Settings) -> None:
    setup = _agent(db, settings)

    outcomes = at_once(*[lambda: _rotate(db, settings, setup.agent_id)] * 2)

    assert all(isinstance(outcome, Rotated) for outcome in outcomes), outcomes
    wallets = _wallets(db, setup.agent_id)
    assert len(wallets) == 3
    assert [w.retired_at is None for w in wallets] == [False, False, True]
    # Each rotation retired the wallet that was current when it held the lock: a chain, no fork.
    retired = {outcome.retired.id for outcome in outcomes if isinstance(outcome, Rotated)}
    assert retired == {wallets[0].id, wallets[1].id}


def test_a_rotation_that_read_the_clock_before_waiting_dates_its_wallet_after_the_one_it_retires(
    db: Database, settings: Settings
) -> None:
    # Two rotations read the clock, then queue on the lock: the later to hold it may carry the
    # earlier time. Its wallet still lists after the wallet it retires, never retired before made.
    setup = _agent(db, settings)
    early = SystemClock().now()
    first = _rotate(db, settings, setup.agent_id)
    master = master_of(settings)
    with db.write() as session:
        agent = get_agent(session, OPERATOR, setup.agent_id)
        new = new_local_wallet(master, private_key=None)
        second = rotate_wallet(session, master=master, agent=agent, new=new, actor="cli:test", now=early)

    wallets = _wallets(db, setup.agent_id)
    assert [w.id for w in wallets][1:] == [first.wallet.id, second.wallet.id]
    retired, current = wallets[1:]
    assert retired.created_at < current.created_at
    assert retired.retired_at is not None
    assert retired.retired_at >= retired.created_at


def test_a_payment_prepared_with_a_retired_wallet_is_refused_at_its_reservation(
    db: Database, settings: Settings
) -> None:
    setup = _agent(db, settings)
    now = SystemClock().now()
    rotated = _rotate(db, settings, setup.agent_id)

    with pytest.raises(WalletChanged):
        reserve_now(db, setup.agent_id, facts("key-old-wallet", payer=OLD_ADDRESS), now)
    reserved = reserve_now(db, setup.agent_id, facts("key-new-wallet", payer=rotated.wallet.address), now)

    with db.read() as session:
        intents = session.exec(select(PaymentIntent).where(PaymentIntent.agent_id == setup.agent_id)).all()
    assert [(i.idempotency_key, i.payer) for i in intents] == [("key-new-wallet", rotated.wallet.address)]
    assert reserved.intent is not None
    assert reserved.intent.id == intents[0].id


def test_a_key_imported_again_after_a_rotation_pays_again(db: Database, settings: Settings) -> None:
    # The old key retired, then given back: its address is current again, so it may pay.
    setup = _agent(db, settings)
    _rotate(db, settings, setup.agent_id)
    _rotate(db, settings, setup.agent_id, key=OLD_KEY)

    reserved = reserve_now(db, setup.agent_id, facts("key-again", payer=OLD_ADDRESS), SystemClock().now())

    assert reserved.intent is not None
    assert reserved.intent.payer == OLD_ADDRESS
