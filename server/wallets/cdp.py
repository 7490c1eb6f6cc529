"""`cdp` wallets: the key stays at Coinbase CDP, in an EVM server account of the organisation.

- **Credentials.** An organisation's CDP API key id, API key secret and wallet secret are kept as
  one value sealed with the master key, under a context only the signers open (they can have CDP
  sign for the organisation, as a wallet key can).
- **One account per agent, by a stable name**: `pw-<org>-<agent>` from the two ids (CDP allows
  letters, digits and hyphens, 2 to 36 of them), or a name the operator gives. A later account for
  the same agent (a rotation) takes the next generation, `pw-<org>-<agent>-2` and so on.
- **Its own policy at CDP**, compiled from the agent's (server/wallet_policies/): the wallet row
  keeps the policy's id there, the digest and policy version of the document CDP last accepted,
  and, while CDP has not taken the document compiled now, the last failure and when to try again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from server.audit.service import record as audit
from server.kit.crypto import MasterKey
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, Organization, Wallet
from server.signers.cdp_credentials import CdpCredentials
from server.signers.loading import seal_cdp_credentials
from server.vocabulary import WalletMode
from server.wallets.master_key import require_current_key
from server.wallets.repository import CdpCredentialsRepository, WalletRepository
from server.wallets.service import SentPolicy, audit_wallet, replace_wallet

ACCOUNT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,34}[A-Za-z0-9]$")
# After a failed attempt to send a wallet's policy, the next waits this long, doubling, up to the cap.
FIRST_RETRY = timedelta(seconds=15)
LONGEST_RETRY = timedelta(minutes=15)


class InvalidAccountName(PaywardenError):
    code = "invalid_account_name"
    message = (
        "A CDP account name is 2 to 36 letters, digits and hyphens, starting and ending with a "
        "letter or a digit."
    )


class CdpNotConnected(PaywardenError):
    code = "cdp_not_connected"
    message = (
        "The organisation has no CDP credentials yet: give the API key id, API key secret and wallet "
        "secret to `paywarden admin wallet connect-cdp` (on stdin or in named variables)."
    )


class CdpAccountInUse(PaywardenError):
    code = "cdp_account_in_use"
    message = (
        "Another agent of the organisation already pays from that CDP account: give this agent an "
        "account of its own (leave out --account-name for one named after it)."
    )


class NotACdpWallet(PaywardenError):
    code = "not_a_cdp_wallet"
    message = "The agent's wallet is not a Coinbase CDP account: there is no wallet policy at CDP to check."


def _hex(some_id: str) -> str:
    return some_id.partition("_")[2] or some_id


def account_name_for(org_id: str, agent_id: str, *, generation: int = 1) -> str:
    """The agent's account name at CDP, the same every time it is asked for the same generation."""
    name = f"pw-{_hex(org_id)[:12]}-{_hex(agent_id)[:12]}"
    return name if generation == 1 else f"{name}-{generation}"


def check_account_name(name: str) -> str:
    name = name.strip()
    if not ACCOUNT_NAME.match(name):
        raise InvalidAccountName()
    return name


def check_account_free(session: Session, *, agent: Agent, account_name: str) -> None:
    """CdpAccountInUse when another agent of the organisation pays from that account: two agents
    under one account would share one wallet policy, the last one sent."""
    found = WalletRepository(session).active_named(org_id=agent.org_id, account_name=account_name)
    if found is not None and found.agent_id != agent.id:
        raise CdpAccountInUse()


def next_account_name(session: Session, agent: Agent) -> str:
    """A name for a new account of the agent (a rotation): the first generation none of its
    wallets ever used."""
    used = {
        wallet.account_name
        for wallet in WalletRepository(session).of_agent(org_id=agent.org_id, agent_id=agent.id)
    }
    generation = 1
    while account_name_for(agent.org_id, agent.id, generation=generation) in used:
        generation += 1
    return account_name_for(agent.org_id, agent.id, generation=generation)


def sealed_cdp_credentials(session: Session, *, org_id: str) -> bytes | None:
    """The organisation's sealed CDP credentials (only a signer opens them), if it has any."""
    org = CdpCredentialsRepository(session).of(org_id=org_id)
    return None if org is None or org.cdp_credentials_sealed is None else bytes(org.cdp_credentials_sealed)


def save_cdp_credentials(
    session: Session,
    *,
    master: MasterKey,
    org: Organization,
    credentials: CdpCredentials,
    actor: str,
    now: datetime,
) -> None:
    """Seal the organisation's CDP credentials with the master key, replacing any it had."""
    require_current_key(session, key_id=master.key_id)
    replaced = org.cdp_credentials_sealed is not None
    org.cdp_credentials_sealed = seal_cdp_credentials(master, org_id=org.id, credentials=credentials)
    org.cdp_credentials_key_id = master.key_id
    org.cdp_connected_at = now
    CdpCredentialsRepository(session).add(org)
    audit(
        session,
        org_id=org.id,
        type="wallet.cdp_credentials_saved",
        actor=actor,
        data={"replaced": replaced},
        now=now,
    )


def register_cdp_wallet(
    session: Session,
    *,
    agent: Agent,
    address: str,
    account_name: str,
    policy: SentPolicy,
    actor: str,
    now: datetime,
) -> Wallet:
    """The CDP account becomes the agent's wallet (mode `cdp`); the one before it is retired."""
    wallet = Wallet(
        id=new_id("wallet"),
        org_id=agent.org_id,
        agent_id=agent.id,
        mode=WalletMode.CDP,
        address=address,
        account_name=account_name,
        created_at=now,
        cdp_policy_id=policy.policy_id,
        cdp_policy_digest=policy.digest,
        cdp_policy_version=policy.version,
        cdp_policy_synced_at=now,
    )
    data: dict[str, object] = {
        "address": address,
        "mode": WalletMode.CDP,
        "accountName": account_name,
        "cdpPolicyId": policy.policy_id,
        "policyVersion": policy.version,
    }
    return replace_wallet(
        session, agent=agent, wallet=wallet, event="wallet.cdp_connected", data=data, actor=actor, now=now
    )


def any_cdp_wallet(session: Session) -> bool:
    """Whether any organisation signs with a `cdp` wallet (a server then loads the SDK at start)."""
    return WalletRepository(session).any_active_cdp()


def cdp_wallets(session: Session) -> list[Wallet]:
    """Every `cdp` wallet in use, of every organisation (for the wallet policy job)."""
    return list(WalletRepository(session).active_cdp())


@dataclass(frozen=True)
class RetiredAccount:
    """A retired `cdp` wallet and where its sweep goes: the agent's current wallet."""

    wallet: Wallet
    payee: str


def retired_cdp_accounts(session: Session, *, agent: Agent | None = None) -> list[RetiredAccount]:
    """Every retired `cdp` account (or the agent's) that keeps a sweep-only policy at CDP: one row
    per agent and address (the newest), and none whose address is the agent's current wallet again
    (an account connected anew: that row's policy is the agent's)."""
    wallets = WalletRepository(session)
    found: list[RetiredAccount] = []
    seen: set[tuple[str, str]] = set()
    retired = (
        wallets.retired_cdp()
        if agent is None
        else wallets.retired_cdp(org_id=agent.org_id, agent_id=agent.id)
    )
    for wallet in retired:
        key = (wallet.agent_id, wallet.address.lower())
        if key in seen:
            continue
        seen.add(key)
        current = wallets.active_for_agent(org_id=wallet.org_id, agent_id=wallet.agent_id)
        if current is not None and current.address.lower() != wallet.address.lower():
            found.append(RetiredAccount(wallet, current.address))
    return found


def record_policy_sent(
    session: Session, *, wallet: Wallet, policy: SentPolicy, created: bool, actor: str, now: datetime
) -> Wallet:
    """CDP took the wallet's policy: the row says what it holds, and any failure streak ends."""
    row = WalletRepository(session).locked(org_id=wallet.org_id, wallet_id=wallet.id)
    if row is None:
        return wallet
    row.cdp_policy_id = policy.policy_id
    row.cdp_policy_digest = policy.digest
    row.cdp_policy_version = policy.version
    row.cdp_policy_synced_at = now
    row.cdp_policy_error = None
    row.cdp_policy_failures = 0
    row.cdp_policy_retry_at = None
    WalletRepository(session).add(row)
    data: dict[str, object] = {
        "cdpPolicyId": policy.policy_id,
        "policyVersion": policy.version,
        "created": created,
    }
    audit_wallet(session, wallet=row, event="wallet.cdp_policy_updated", data=data, actor=actor, now=now)
    return row


def record_policy_version(session: Session, *, wallet: Wallet, version: int) -> None:
    """A new policy version that compiles to the document CDP already holds: nothing to send, and
    the row now names that version."""
    row = WalletRepository(session).locked(org_id=wallet.org_id, wallet_id=wallet.id)
    if row is not None and row.cdp_policy_version != version:
        row.cdp_policy_version = version
        WalletRepository(session).add(row)


def record_policy_failure(
    session: Session, *, wallet: Wallet, error: str, actor: str, now: datetime
) -> Wallet:
    """CDP did not take the wallet's policy: the row says why and when it is tried again (sooner
    first, then less often); the first failure of a streak is an audit event."""
    row = WalletRepository(session).locked(org_id=wallet.org_id, wallet_id=wallet.id)
    if row is None:
        return wallet
    row.cdp_policy_failures += 1
    row.cdp_policy_error = error
    doublings = min(row.cdp_policy_failures - 1, 10)
    row.cdp_policy_retry_at = now + min(FIRST_RETRY * 2**doublings, LONGEST_RETRY)
    WalletRepository(session).add(row)
    if row.cdp_policy_failures == 1:
        data: dict[str, object] = {"error": error, "cdpPolicyId": row.cdp_policy_id}
        audit_wallet(
            session, wallet=row, event="wallet.cdp_policy_sync_failed", data=data, actor=actor, now=now
        )
    return row


def record_cdp_policy_refusal(
    session: Session, *, wallet: Wallet, intent_id: str, actor: str, now: datetime
) -> None:
    """The audit event of a payment CDP's Policy Engine refused to sign: the wallet's public facts."""
    audit_wallet(
        session,
        wallet=wallet,
        event="wallet.cdp_policy_refused",
        data={"cdpPolicyId": wallet.cdp_policy_id, "policyVersion": wallet.cdp_policy_version},
        actor=actor,
        now=now,
        subject_id=intent_id,
    )
