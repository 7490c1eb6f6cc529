"""What the rest of Paywarden does with a sealed wallet key goes through the signer: importing
seals it under the wallet's own context, a database without a key check value recognises its
master key by opening one, and the signer loaded for the wallet signs with that key."""

from __future__ import annotations

import pytest
from eth_account import Account
from sqlmodel import delete, select

from server.kit.crypto import MasterKey, SealError
from server.kit.db import Database
from server.models import MasterKeyCheck, Wallet
from server.settings import Settings
from server.signers.key_material import wallet_context
from server.wallets.master_key import MasterKeyMismatch, check_master_key
from server.wallets.service import signer_for
from tests.support.clocks import frozen_clock, written
from tests.support.paywarden import TEST_MASTER_KEY, settings_for
from tests.support.tenants import make_agent

KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
NOW = written(2026, 12, 4, 12)


def _settings(db: Database) -> Settings:
    return settings_for(database_url=db.url, port=1)


def _wallet(db: Database) -> Wallet:
    setup = make_agent(db, _settings(db), allow_hosts=["example.com"], wallet_key=KEY)
    with db.read() as session:
        return session.exec(select(Wallet).where(Wallet.agent_id == setup.agent_id)).one()


def test_an_imported_key_is_sealed_for_its_wallet_and_opens_only_in_the_signer(db: Database) -> None:
    wallet = _wallet(db)
    master = MasterKey.parse(TEST_MASTER_KEY)
    assert wallet.sealed_secret is not None

    with pytest.raises(SealError):
        master.open(wallet.sealed_secret, context=wallet_context(wallet.id))
    signer = signer_for(wallet, master, usdc_by_network=_settings(db).assets, clock=frozen_clock(NOW))
    assert signer.address == Account.from_key(KEY).address == wallet.address


def test_without_a_check_value_the_master_key_is_recognised_by_a_sealed_wallet(db: Database) -> None:
    _wallet(db)
    with db.write() as session:
        session.exec(delete(MasterKeyCheck))

    with db.write() as session, pytest.raises(MasterKeyMismatch):
        check_master_key(session, master=MasterKey(b"\x08" * 32), name="PAYWARDEN_MASTER_KEY", now=NOW)
    with db.write() as session:
        check_master_key(
            session, master=MasterKey.parse(TEST_MASTER_KEY), name="PAYWARDEN_MASTER_KEY", now=NOW
        )
    with db.read() as session:
        stored = session.get(MasterKeyCheck, 1)
    assert stored is not None
    assert stored.check_value == MasterKey.parse(TEST_MASTER_KEY).check_value()
