"""Import and load agents' wallets. Keys are sealed with the master key, bound to the wallet id."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from server.audit.service import record as audit
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, PaymentIntent, Wallet
from server.signers.base import Signer
from server.signers.cdp_api import CdpClientPool
from server.signers.errors import SignerError, SignRefused
from server.signers.intents import AuthorisedIntent, TransferRequest
from server.signers.loading import cdp_signer, generate_local_key, local_key_signer, seal_local_key
from server.vocabulary import WalletMode
from server.wallets.master_key import require_current_key
from server.wallets.repository import WalletRepository
from server.x402.selection import Selection

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


def wallets_of(session: Session, agent: Agent) -> list[Wallet]:
    """Every wallet the agent had, newest first: its current one, then the retired ones."""
    return list(WalletRepository(session).of_agent(org_id=agent.org_id, agent_id=agent.id))


def pays_for_another_agent(session: Session, *, address: str, agent: Agent) -> bool:
    """Whether `address` is the current wallet of another agent, of any organisation."""
    return any(
        wallet.agent_id != agent.id for wallet in WalletRepository(session).current_with_address(address)
    )


def is_retired_payer(session: Session, agent: Agent, payer: str) -> bool:
    """Whether `payer` is a wallet the agent no longer pays from (rotated away), and not its
    current one too (a key imported again). One indexed read: it runs in every reservation."""
    states = WalletRepository(session).retired_states(org_id=agent.org_id, agent_id=agent.id, address=payer)
    return bool(states) and all(retired_at is not None for retired_at in states)


@dataclass(frozen=True)
class SentPolicy:
    """A `cdp` wallet's own policy as CDP accepted it: its id there, and what was sent."""

    policy_id: str
    digest: str  # SHA-256 of the compiled document
    version: int  # the agent's policy version it was compiled from


@dataclass(frozen=True)
class NewWallet:
    """A wallet made ready for an agent before the transaction that gives it: its id, how it signs,
    its address, and its key sealed for that id (local_key) or its account's name and the policy
    CDP holds for it (cdp)."""

    id: str
    mode: WalletMode
    address: str
    sealed_secret: bytes | None
    sealed_key_id: str | None
    account_name: str | None = None
    policy: SentPolicy | None = None


def new_local_wallet(master: MasterKey, *, private_key: bytes | None) -> NewWallet:
    """A local_key wallet: the key given (already parsed), or a new one made and sealed here."""
    wallet_id = new_id("wallet")
    if private_key is None:
        generated = generate_local_key(master, wallet_id=wallet_id)
        address, sealed = generated.address, generated.sealed
    else:
        from eth_account import Account

        address = str(Account.from_key(private_key).address)
        sealed = seal_local_key(master, wallet_id=wallet_id, private_key=private_key)
    return NewWallet(wallet_id, WalletMode.LOCAL_KEY, address, sealed, master.key_id)


@dataclass(frozen=True)
class Installed:
    wallet: Wallet
    previous: Wallet | None  # the wallet it replaced, retired now


def _install(session: Session, *, agent: Agent, wallet: Wallet, now: datetime) -> Installed:
    """`wallet` becomes the agent's wallet and the one it had (if any) is retired, under the
    organisation's lock: a reservation, which takes the same lock, sees one or the other."""
    lock_org(session, agent.org_id)
    wallets = WalletRepository(session)
    previous = wallets.active_for_agent(org_id=agent.org_id, agent_id=agent.id)
    if previous is not None:
        previous.retired_at = now
        wallets.add(previous, flush=False)
    wallets.add(wallet)
    return Installed(wallet, previous)


def install_wallet(
    session: Session, *, master: MasterKey, agent: Agent, new: NewWallet, now: datetime
) -> Installed:
    """`new` becomes the agent's wallet (see `_install`); a sealed key must be sealed with the
    master key in force."""
    return _install(session, agent=agent, wallet=_row(session, master, agent, new, now), now=now)


def _row(session: Session, master: MasterKey, agent: Agent, new: NewWallet, now: datetime) -> Wallet:
    if new.sealed_secret is not None:
        require_current_key(session, key_id=master.key_id)
    return Wallet(
        id=new.id,
        org_id=agent.org_id,
        agent_id=agent.id,
        mode=new.mode,
        address=new.address,
        sealed_secret=new.sealed_secret,
        sealed_key_id=new.sealed_key_id,
        account_name=new.account_name,
        created_at=now,
        cdp_policy_id=new.policy.policy_id if new.policy else None,
        cdp_policy_digest=new.policy.digest if new.policy else None,
        cdp_policy_version=new.policy.version if new.policy else None,
        cdp_policy_synced_at=now if new.policy else None,
    )


def replace_wallet(
    session: Session,
    *,
    agent: Agent,
    wallet: Wallet,
    event: str,
    data: dict[str, object],
    actor: str,
    now: datetime,
) -> Wallet:
    """`wallet`, a row made by its backend, becomes the agent's (see `_install`), in one audit
    event that says which it replaced."""
    previous = _install(session, agent=agent, wallet=wallet, now=now).previous
    audit(
        session,
        org_id=agent.org_id,
        type=event,
        actor=actor,
        agent_id=agent.id,
        subject_id=wallet.id,
        data={**data, "replaced": previous.id if previous else None},
        now=now,
    )
    return wallet


def import_local_key(
    session: Session, *, master: MasterKey, agent: Agent, private_key: bytes, actor: str, now: datetime
) -> Wallet:
    new = new_local_wallet(master, private_key=private_key)
    wallet = _row(session, master, agent, new, now)
    data: dict[str, object] = {"address": new.address, "mode": WalletMode.LOCAL_KEY}
    return replace_wallet(
        session, agent=agent, wallet=wallet, event="wallet.imported", data=data, actor=actor, now=now
    )


@dataclass(frozen=True)
class CdpAccess:
    """How a `cdp` wallet's signer reaches CDP: the API's base URL and the organisation's sealed
    credentials (None when it has none)."""

    api_url: str
    sealed_credentials: bytes | None
    pool: CdpClientPool | None = None  # a server's open clients; None: a client per call


def signer_for(
    wallet: Wallet,
    master: MasterKey,
    *,
    usdc_by_network: Mapping[str, str],
    clock: Clock,
    cdp: CdpAccess | None = None,
) -> Signer:
    """The wallet's signer: it signs only an intent the ledger authorised, for the configured USDC.
    A `cdp` wallet's needs `cdp`, its organisation's way to CDP."""
    if wallet.mode == WalletMode.LOCAL_KEY:
        if wallet.sealed_secret is None:
            raise SignerError("the wallet has no sealed key")
        return local_key_signer(
            master,
            wallet_id=wallet.id,
            sealed=wallet.sealed_secret,
            usdc_by_network=usdc_by_network,
            clock=clock,
        )
    if wallet.mode == WalletMode.CDP:
        if cdp is None or cdp.sealed_credentials is None:
            raise SignerError("the organisation has no CDP credentials")
        return cdp_signer(
            master,
            org_id=wallet.org_id,
            sealed=cdp.sealed_credentials,
            address=wallet.address,
            api_url=cdp.api_url,
            usdc_by_network=usdc_by_network,
            clock=clock,
            pool=cdp.pool,
        )
    raise SignerError(f"signing mode {str(wallet.mode)!r} is not available")


def intent_to_sign(intent: PaymentIntent) -> AuthorisedIntent:
    """The intent as the ledger recorded it, for the signer to check what it is asked to sign."""
    return AuthorisedIntent(
        id=intent.id,
        status=str(intent.status),
        network=intent.network,
        asset=intent.asset,
        pay_to=intent.pay_to,
        amount_atomic=intent.amount_atomic,
        payer=intent.payer,
        nonce=intent.nonce,
        valid_after=intent.valid_after,
        valid_before=intent.valid_before,
    )


def transfer_request(selection: Selection) -> TransferRequest:
    """What the seller's chosen offer asks to be paid."""
    return TransferRequest(
        network=selection.network,
        asset=selection.asset,
        pay_to=selection.pay_to,
        amount_atomic=selection.amount_atomic,
        domain_name=selection.domain_name,
        domain_version=selection.domain_version,
    )


def audit_wallet(
    session: Session,
    *,
    wallet: Wallet,
    event: str,
    data: dict[str, object],
    actor: str,
    now: datetime,
    subject_id: str | None = None,
) -> None:
    """An audit event about the wallet: `data` and the wallet's public facts (id, address, mode),
    never a key. Its subject is the wallet unless another is named (a payment's intent)."""
    audit(
        session,
        org_id=wallet.org_id,
        type=event,
        actor=actor,
        agent_id=wallet.agent_id,
        subject_id=subject_id or wallet.id,
        data={**data, "wallet": wallet.id, "address": wallet.address, "mode": wallet.mode},
        now=now,
    )


def record_sign_refused(
    session: Session, *, wallet: Wallet, intent_id: str, refused: SignRefused, actor: str, now: datetime
) -> None:
    """The audit event of a refused signature: the reason and the wallet's public address, no more."""
    audit_wallet(
        session,
        wallet=wallet,
        event="wallet.sign_refused",
        data={"reason": str(refused.reason)},
        actor=actor,
        now=now,
        subject_id=intent_id,
    )
