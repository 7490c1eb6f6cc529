"""Import and load agents' wallets. Keys are sealed with the master key, bound to the wallet id."""

from __future__ import annotations

import re
from datetime import datetime

from sqlmodel import Session

from server.audit.service import record as audit
from server.kit.crypto import MasterKey
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, Wallet
from server.signers.base import Signer, SignerError
from server.signers.local_key import LocalKeySigner
from server.vocabulary import WalletMode
from server.wallets.master_key import require_current_key
from server.wallets.repository import WalletRepository
from server.wallets.sealed import wallet_context

_KEY = re.compile(r"^(0x)?[0-9a-fA-F]{64}$")


class InvalidWalletKey(PaywardenError):
    code = "invalid_wallet_key"
    message = "The value is not a wallet private key (64 hex digits, optionally 0x-prefixed)."


def parse_private_key(text: str) -> bytes:
    text = text.strip()
    if not _KEY.match(text):
        raise InvalidWalletKey()
    raw = bytes.fromhex(text.removeprefix("0x"))
    from eth_account import Account  # half a second to load: only commands that handle a key pay it

    try:
        Account.from_key(raw)
    except (ValueError, TypeError) as exc:
        raise InvalidWalletKey() from exc
    return raw


def active_wallet(session: Session, agent: Agent) -> Wallet | None:
    return WalletRepository(session).active_for_agent(org_id=agent.org_id, agent_id=agent.id)


def import_local_key(
    session: Session, *, master: MasterKey, agent: Agent, private_key: bytes, actor: str, now: datetime
) -> Wallet:
    from eth_account import Account

    address = str(Account.from_key(private_key).address)
    require_current_key(session, key_id=master.key_id)
    wallets = WalletRepository(session)
    previous = wallets.active_for_agent(org_id=agent.org_id, agent_id=agent.id)
    if previous is not None:
        previous.retired_at = now
        wallets.add(previous, flush=False)
    wallet_id = new_id("wallet")
    wallet = Wallet(
        id=wallet_id,
        org_id=agent.org_id,
        agent_id=agent.id,
        mode=WalletMode.LOCAL_KEY,
        address=address,
        sealed_secret=master.seal(private_key, context=wallet_context(wallet_id)),
        sealed_key_id=master.key_id,
        created_at=now,
    )
    wallets.add(wallet)
    audit(
        session,
        org_id=agent.org_id,
        type="wallet.imported",
        actor=actor,
        agent_id=agent.id,
        subject_id=wallet.id,
        data={
            "address": address,
            "mode": WalletMode.LOCAL_KEY,
            "replaced": previous.id if previous else None,
        },
        now=now,
    )
    return wallet


def signer_for(wallet: Wallet, master: MasterKey) -> Signer:
    if wallet.mode == WalletMode.LOCAL_KEY:
        if wallet.sealed_secret is None:
            raise SignerError("the wallet has no sealed key")
        return LocalKeySigner(master.open(wallet.sealed_secret, context=wallet_context(wallet.id)))
    raise SignerError(f"signing mode {str(wallet.mode)!r} is not available")
