"""Rotating an agent's wallet (`admin wallet rotate`): a new wallet becomes the agent's in one
transaction, and the one it replaces is retired, kept and listed, so what is left in it can be
swept (server/payments/sweeps/).

From the commit on, every process signs the agent's new payments with the new wallet (each
payment reads the agent's wallet from the database, and the reservation checks it again under
the organisation's lock). A payment reserved on the old wallet before that keeps its payer: it
is signed, settles and is verified against the old wallet.

The wallet it moves to is made before that transaction (server/wallet_policies/rotation.py): a
key made here and sealed, a key given, or, for a `cdp` wallet, the next account of the
organisation's CDP project. The master key's own rotation is another thing:
server/wallets/rotation.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from server.audit.service import record as audit
from server.kit.crypto import MasterKey
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.models import Agent, Wallet
from server.wallets.service import NewWallet, active_wallet, install_wallet

ROTATED_EVENT = "wallet.rotated"


class NothingToRotate(PaywardenError):
    code = "no_wallet_to_rotate"
    message = (
        "The agent has no wallet yet, so there is nothing to rotate: give it one with "
        "`paywarden admin wallet import`."
    )


class WalletUnchanged(PaywardenError):
    code = "wallet_unchanged"
    message = "That key or account is the agent's current wallet already: nothing was rotated."


@dataclass(frozen=True)
class Rotated:
    wallet: Wallet  # the agent's wallet from now on
    retired: Wallet  # the one it replaced, kept for sweeping


def rotate_wallet(
    session: Session, *, master: MasterKey, agent: Agent, new: NewWallet, actor: str, now: datetime
) -> Rotated:
    """Make `new` the agent's wallet and retire its current one, audited; never commits (the
    caller's unit of work is the one transaction)."""
    lock_org(session, agent.org_id)  # two rotations at once: the second sees the first's wallet
    current = active_wallet(session, agent)
    if current is None:
        raise NothingToRotate(agentId=agent.id)
    # `now` was read before the lock; a rotation that waited behind another must date its wallet
    # strictly after the one it retires, or the chain of wallets would list out of order.
    now = max(now, current.created_at + timedelta(microseconds=1))
    if current.address.lower() == new.address.lower():
        raise WalletUnchanged(agentId=agent.id, address=current.address)
    installed = install_wallet(session, master=master, agent=agent, new=new, now=now)
    retired = installed.previous
    assert retired is not None
    assert retired.id == current.id
    audit(
        session,
        org_id=agent.org_id,
        type=ROTATED_EVENT,
        actor=actor,
        agent_id=agent.id,
        subject_id=new.id,
        data={
            "address": new.address,
            "mode": str(new.mode),
            "retiredWallet": retired.id,
            "retiredAddress": retired.address,
            "retiredMode": str(retired.mode),
            **({"accountName": new.account_name} if new.account_name else {}),
        },
        now=now,
    )
    return Rotated(installed.wallet, retired)
