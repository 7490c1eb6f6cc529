"""The tables: tenancy (organisations, teams, members, agents), policy and rule versions, wallets,
tokens, the ledger of payment intents, approvals, the catalog, audit and job leases."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from server.models.base import EnumColumn, UTCDateTime
from server.models.enums import (
    ApprovalStatus,
    FindingKind,
    HoldReason,
    IntentStatus,
    Origin,
    PayToMode,
    Role,
    RuleKind,
    RuleScope,
    RuleSource,
    RuleWindow,
    TokenKind,
    WalletMode,
)


def _ts(nullable: bool = False, index: bool = False) -> Any:
    return Field(default=None, sa_column=Column(UTCDateTime(), nullable=nullable, index=index))


def _enum(enum: type[StrEnum], length: int, *, nullable: bool = False) -> Any:
    return Field(default=None, sa_column=Column(EnumColumn(enum, length), nullable=nullable))


class Organization(SQLModel, table=True):
    __tablename__ = "organizations"

    id: str = Field(primary_key=True, max_length=40)
    name: str = Field(max_length=120, unique=True)
    approval_ttl_seconds: int = Field(default=900)
    created_at: datetime = _ts()


class Team(SQLModel, table=True):
    """A group of an organisation's agents; team rules apply to all of them together."""

    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    name: str = Field(max_length=120)
    created_at: datetime = _ts()


class Member(SQLModel, table=True):
    """A person of one organisation. Only the hash of the one-time enrolment token is kept."""

    __tablename__ = "members"
    __table_args__ = (UniqueConstraint("org_id", "email"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    email: str = Field(max_length=254)
    role: Role = _enum(Role, 20)
    enroll_token_hash: str | None = Field(default=None, max_length=64, unique=True)
    enroll_expires_at: datetime | None = _ts(nullable=True)
    created_at: datetime = _ts()
    disabled_at: datetime | None = _ts(nullable=True)


class Agent(SQLModel, table=True):
    __tablename__ = "agents"
    __table_args__ = (UniqueConstraint("org_id", "name"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    name: str = Field(max_length=120)
    network: str = Field(max_length=40)
    team_id: str | None = Field(default=None, foreign_key="teams.id", index=True, max_length=40)
    member_id: str | None = Field(default=None, foreign_key="members.id", index=True, max_length=40)
    created_at: datetime = _ts()
    disabled_at: datetime | None = _ts(nullable=True)


class PolicyVersion(SQLModel, table=True):
    """One immutable row per version of an agent's policy; the newest version is in force."""

    __tablename__ = "policy_versions"
    __table_args__ = (UniqueConstraint("agent_id", "version"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    version: int
    document: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_by: str = Field(max_length=120)
    created_at: datetime = _ts()


class RuleVersion(SQLModel, table=True):
    """One immutable row per version of a spending rule; the newest version of a rule is in force.

    Removing a rule writes a version with `active` false, so every decision's recorded versions can
    still be read back. `scope_id` names the agent, team, member or organisation the rule is for.
    """

    __tablename__ = "rule_versions"
    __table_args__ = (Index("ix_rule_versions_scope", "scope", "scope_id"),)

    rule_id: str = Field(primary_key=True, max_length=40)
    version: int = Field(primary_key=True)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    scope: RuleScope = _enum(RuleScope, 10)
    scope_id: str = Field(max_length=40)
    kind: RuleKind = _enum(RuleKind, 10)
    host: str | None = Field(default=None, max_length=255)
    path_prefix: str | None = Field(default=None, max_length=512)
    limit_atomic: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    window: RuleWindow | None = _enum(RuleWindow, 10, nullable=True)
    source: RuleSource = _enum(RuleSource, 10)
    active: bool = True
    expires_at: datetime | None = _ts(nullable=True)
    created_by: str = Field(max_length=160)
    created_at: datetime = _ts()


class Wallet(SQLModel, table=True):
    """The wallet an agent signs with. A retired wallet stays for the record."""

    __tablename__ = "wallets"

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", index=True, max_length=40)
    mode: WalletMode = _enum(WalletMode, 20)
    address: str = Field(max_length=42)
    sealed_secret: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    account_name: str | None = Field(default=None, max_length=120)
    created_at: datetime = _ts()
    retired_at: datetime | None = _ts(nullable=True)


class AccessToken(SQLModel, table=True):
    """Bearer tokens of every kind; only the SHA-256 of the secret is kept."""

    __tablename__ = "access_tokens"

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str | None = Field(default=None, foreign_key="agents.id", index=True, max_length=40)
    client_id: str | None = Field(default=None, max_length=120)
    kind: TokenKind = _enum(TokenKind, 20)
    token_hash: str = Field(max_length=64, unique=True)
    scopes: str = Field(max_length=400)
    audience: str = Field(max_length=400)
    label: str | None = Field(default=None, max_length=120)
    created_by: str = Field(max_length=120)
    created_at: datetime = _ts()
    expires_at: datetime = _ts()
    revoked_at: datetime | None = _ts(nullable=True)


class PaymentIntent(SQLModel, table=True):
    """One purchase: what the seller asked, what the policy decided, what was signed and settled."""

    __tablename__ = "payment_intents"
    __table_args__ = (
        UniqueConstraint("agent_id", "idempotency_key"),
        UniqueConstraint("payer", "nonce"),
        Index("ix_payment_intents_agent_created", "agent_id", "created_at"),
        Index("ix_payment_intents_org_authorized", "org_id", "authorized_at"),
        Index("ix_payment_intents_status_valid_before", "status", "valid_before"),
        Index("ix_payment_intents_org_pay_to", "org_id", "pay_to"),
    )

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    idempotency_key: str = Field(max_length=128)
    fingerprint: str = Field(max_length=64)
    status: IntentStatus = _enum(IntentStatus, 24)
    origin: Origin | None = _enum(Origin, 10, nullable=True)
    method: str = Field(max_length=10)
    host: str = Field(max_length=255)
    resource: str = Field(max_length=2048)  # the URL without its query string
    path: str | None = Field(default=None, max_length=2048)  # the requested path, for rule conditions
    x402_version: int
    network: str = Field(max_length=40)
    asset: str = Field(max_length=42)
    pay_to: str = Field(max_length=42)
    amount_atomic: int = Field(sa_column=Column(BigInteger, nullable=False))
    payer: str = Field(max_length=42)
    nonce: str = Field(max_length=66)
    # 0 while the intent waits for a human (`created`): the window is set when it is authorised.
    valid_after: int = Field(sa_column=Column(BigInteger, nullable=False))
    valid_before: int = Field(sa_column=Column(BigInteger, nullable=False))
    policy_version: int
    decision: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    wallet_mode: WalletMode = _enum(WalletMode, 20)
    seller_status: int | None = None
    tx_hash: str | None = Field(default=None, max_length=66)  # only ever one found on-chain
    seller_tx_hash: str | None = Field(default=None, max_length=66)  # what the seller claimed
    failure_code: str | None = Field(default=None, max_length=60)
    seller_reason: str | None = Field(default=None, max_length=500)
    created_at: datetime = _ts()
    authorized_at: datetime | None = _ts(nullable=True)  # None while held for a human
    submitted_at: datetime | None = _ts(nullable=True)
    completed_at: datetime | None = _ts(nullable=True)
    settled_at: datetime | None = _ts(nullable=True)
    updated_at: datetime = _ts()
    # Chain evidence that a sent authorisation can never move money: a block `PAYWARDEN_CONFIRMATIONS`
    # deep, stamped at or past validBefore, as of which the token said the nonce was unused.
    lapse_block: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    lapse_block_time: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))


class Approval(SQLModel, table=True):
    """A held payment waiting for (or decided by) a human. It belongs to exactly one intent, whose
    idempotency key the agent retries with once the approval is granted."""

    __tablename__ = "approvals"
    __table_args__ = (
        Index("ix_approvals_org_status", "org_id", "status"),
        Index("ix_approvals_agent_status", "agent_id", "status"),
    )

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    intent_id: str = Field(foreign_key="payment_intents.id", unique=True, max_length=40)
    idempotency_key: str = Field(max_length=128)
    status: ApprovalStatus = _enum(ApprovalStatus, 12)
    reason: HoldReason = _enum(HoldReason, 40)
    threshold_atomic: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    amount_atomic: int = Field(sa_column=Column(BigInteger, nullable=False))
    host: str = Field(max_length=255)
    resource: str = Field(max_length=2048)
    pay_to: str = Field(max_length=42)
    network: str = Field(max_length=40)
    asset: str = Field(max_length=42)
    decision: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime = _ts()
    expires_at: datetime = _ts()
    decided_at: datetime | None = _ts(nullable=True)
    decided_by: str | None = Field(default=None, max_length=40)  # the member who decided
    consumed_at: datetime | None = _ts(nullable=True)


class CatalogEntry(SQLModel, table=True):
    """A seller listed in the catalog. `pinned_pay_to` holds its known receiving addresses,
    lower-case; an empty list means the seller rotates its address (`pay_to_mode` rotating)."""

    __tablename__ = "catalog_entries"

    id: str = Field(primary_key=True, max_length=40)
    host: str = Field(max_length=255, unique=True)
    name: str = Field(max_length=120)
    url: str = Field(max_length=2048)
    price_atomic: int = Field(sa_column=Column(BigInteger, nullable=False))
    network: str = Field(max_length=40)
    category: str = Field(max_length=40)
    pay_to_mode: PayToMode = _enum(PayToMode, 10)
    pinned_pay_to: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_by: str = Field(max_length=160)
    created_at: datetime = _ts()
    verified_at: datetime | None = _ts(nullable=True)
    suspended_at: datetime | None = _ts(nullable=True)


class AuditEvent(SQLModel, table=True):
    """Append-only; each organisation's events form a keyed hash chain ordered by `seq`.

    Triggers refuse UPDATE and DELETE (migration 20261130_0005). A later migration that rebuilds
    this table on SQLite (a batch operation copies it) must create them again."""

    __tablename__ = "audit_events"
    __table_args__ = (UniqueConstraint("org_id", "seq"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    seq: int
    type: str = Field(max_length=60)
    actor: str = Field(max_length=160)
    agent_id: str | None = Field(default=None, max_length=40, index=True)
    subject_id: str | None = Field(default=None, max_length=40)
    data: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime = _ts()
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class ChainScanCursor(SQLModel, table=True):
    """How far the out-of-policy scan has read one wallet's token logs on one network."""

    __tablename__ = "chain_scan_cursors"

    network: str = Field(primary_key=True, max_length=40)
    asset: str = Field(primary_key=True, max_length=42)
    address: str = Field(primary_key=True, max_length=42)
    next_block: int = Field(sa_column=Column(BigInteger, nullable=False))
    updated_at: datetime = _ts()


class OutOfPolicyFinding(SQLModel, table=True):
    """Money that left an agent's wallet without matching a payment Paywarden allowed.

    One row per agent and token log (transaction hash and log index), so a scan that reads the
    same blocks twice never reports a movement twice.
    """

    __tablename__ = "out_of_policy_findings"
    __table_args__ = (
        UniqueConstraint("agent_id", "network", "tx_hash", "log_index"),
        Index("ix_out_of_policy_findings_agent_detected", "agent_id", "detected_at"),
    )

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    wallet_address: str = Field(max_length=42)
    network: str = Field(max_length=40)
    asset: str = Field(max_length=42)
    tx_hash: str = Field(max_length=66)
    log_index: int
    block_number: int = Field(sa_column=Column(BigInteger, nullable=False))
    kind: FindingKind = _enum(FindingKind, 40)
    counterparty: str | None = Field(default=None, max_length=42)
    amount_atomic: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    nonce: str | None = Field(default=None, max_length=66)
    intent_id: str | None = Field(default=None, max_length=40)
    detected_at: datetime = _ts()


class MasterKeyCheck(SQLModel, table=True):
    """The check value of the master key this database was set up with (one row): a process
    started with another key refuses to run instead of failing at its first signature."""

    __tablename__ = "master_key_checks"

    id: int = Field(primary_key=True)  # always 1
    check_value: str = Field(max_length=64)
    created_at: datetime = _ts()


class JobLease(SQLModel, table=True):
    """Which process runs a background job now. A lease that is not renewed lapses."""

    __tablename__ = "job_leases"

    name: str = Field(primary_key=True, max_length=60)
    holder: str = Field(max_length=120)
    expires_at: datetime = _ts()
