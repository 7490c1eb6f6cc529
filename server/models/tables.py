"""The tables: tenancy (organisations, teams, members, agents), policy and rule versions, wallets,
tokens, the ledger of payment intents, approvals, the catalog, audit and job leases; and identity:
OAuth clients, grants and codes, members' passkeys, browser sessions, WebAuthn challenges and
rate-limit counters."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, Integer, LargeBinary, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from server.models.base import EnumColumn, UTCDateTime
from server.vocabulary import (
    ApprovalStatus,
    CatalogSource,
    ChallengePurpose,
    ClientKind,
    FindingKind,
    HoldReason,
    IntentStatus,
    NotificationStatus,
    Origin,
    PaymentSender,
    PayToMode,
    PendingChangeKind,
    PolicyChangeStatus,
    Role,
    RuleKind,
    RuleScope,
    RuleSource,
    RuleWindow,
    StepUpAction,
    SuspensionReason,
    SweepStatus,
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
    # The organisation's own Slack webhook (its URL is a secret): sealed with the master key, and
    # the masked form pages show.
    slack_webhook_sealed: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    slack_webhook_masked: str | None = Field(default=None, max_length=80)
    slack_webhook_key_id: str | None = Field(default=None, max_length=16)  # the master key it is sealed with
    # The seller circuit breaker: this many paid-but-not-delivered outcomes from one host within
    # this many hours block the host for the organisation (docs/payments.md).
    circuit_failures: int = Field(default=3, sa_column=Column(Integer, nullable=False, server_default="3"))
    circuit_window_hours: int = Field(
        default=24, sa_column=Column(Integer, nullable=False, server_default="24")
    )
    # The organisation's Coinbase CDP credentials (API key id, API key secret, wallet secret):
    # sealed with the master key under a context only the signers open (server/signers/).
    cdp_credentials_sealed: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    cdp_credentials_key_id: str | None = Field(
        default=None, max_length=16
    )  # the master key it is sealed with
    cdp_connected_at: datetime | None = _ts(nullable=True)


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
    sealed_key_id: str | None = Field(default=None, max_length=16)  # the master key it is sealed with
    account_name: str | None = Field(default=None, max_length=120)
    created_at: datetime = _ts()
    retired_at: datetime | None = _ts(nullable=True)
    # A `cdp` wallet's own policy at CDP, compiled from the agent's (server/wallet_policies/): its
    # id there, the digest and policy version of the document CDP last accepted, and, while CDP
    # has not taken the document compiled now, the last failure and when it is tried again.
    cdp_policy_id: str | None = Field(default=None, max_length=64)
    cdp_policy_digest: str | None = Field(default=None, max_length=64)
    cdp_policy_version: int | None = None
    cdp_policy_synced_at: datetime | None = _ts(nullable=True)
    cdp_policy_error: str | None = Field(default=None, max_length=60)
    cdp_policy_failures: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    cdp_policy_retry_at: datetime | None = _ts(nullable=True)


class WalletSweep(SQLModel, table=True):
    """A retired wallet's whole USDC balance on one network, moved to the agent's current wallet by
    one EIP-3009 authorisation whose nonce is derived from this row's id (server/payments/sweeps/).
    Never counted against a cap: it moves the organisation's money between its own wallets."""

    __tablename__ = "wallet_sweeps"
    __table_args__ = (Index("ix_wallet_sweeps_agent_created", "agent_id", "created_at"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    wallet_id: str = Field(foreign_key="wallets.id", index=True, max_length=40)  # the retired one
    to_wallet_id: str = Field(foreign_key="wallets.id", max_length=40)  # current when authorised
    network: str = Field(max_length=40)
    asset: str = Field(max_length=42)
    payer: str = Field(max_length=42)
    pay_to: str = Field(max_length=42)
    amount_atomic: int = Field(sa_column=Column(BigInteger, nullable=False))
    nonce: str = Field(max_length=66)
    valid_after: int = Field(sa_column=Column(BigInteger, nullable=False))
    valid_before: int = Field(sa_column=Column(BigInteger, nullable=False))
    status: SweepStatus = _enum(SweepStatus, 12)
    # "<wallet id> <network>" while the sweep is open, NULL once it ended: a unique column, so a
    # retired wallet has at most one open sweep per network (NULLs never collide).
    open_slot: str | None = Field(default=None, max_length=90, unique=True)
    signature: str | None = Field(default=None, max_length=132)
    # The transaction that carries the authorisation, as signed by whoever pays its gas: kept
    # before it is sent, so a second run sends the same one again rather than another.
    raw_transaction: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    tx_hash: str | None = Field(default=None, max_length=66)
    submitted_by: str | None = Field(default=None, max_length=42)
    failure_code: str | None = Field(default=None, max_length=60)
    lapse_block: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    created_by: str = Field(max_length=120)
    created_at: datetime = _ts()
    signed_at: datetime | None = _ts(nullable=True)
    submitted_at: datetime | None = _ts(nullable=True)
    ended_at: datetime | None = _ts(nullable=True)
    updated_at: datetime = _ts()


class AccessToken(SQLModel, table=True):
    """Bearer tokens of every kind; only the SHA-256 of the secret is kept.

    Tokens the authorization server issues name their client (`client_id`, the client row's id),
    the grant they came from, and their refresh family: every access and refresh token descended
    from one authorization code shares a `family_id`, so a reused refresh token revokes them all.
    A refresh token that was exchanged keeps its row, with `rotated_at` set.
    """

    __tablename__ = "access_tokens"

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str | None = Field(default=None, foreign_key="agents.id", index=True, max_length=40)
    client_id: str | None = Field(default=None, max_length=120)
    grant_id: str | None = Field(default=None, foreign_key="oauth_grants.id", index=True, max_length=40)
    family_id: str | None = Field(default=None, index=True, max_length=40)
    kind: TokenKind = _enum(TokenKind, 20)
    token_hash: str = Field(max_length=64, unique=True)
    scopes: str = Field(max_length=400)
    audience: str = Field(max_length=400)
    label: str | None = Field(default=None, max_length=120)
    created_by: str = Field(max_length=120)
    created_at: datetime = _ts()
    expires_at: datetime = _ts()
    revoked_at: datetime | None = _ts(nullable=True)
    rotated_at: datetime | None = _ts(nullable=True)


class OAuthClient(SQLModel, table=True):
    """An OAuth client: registered dynamically, known from its metadata document (a cached copy,
    refreshed as the document's HTTP caching allows), or created by an operator for
    client_credentials and bound to one agent. Only the SHA-256 of a client secret is kept."""

    __tablename__ = "oauth_clients"

    id: str = Field(primary_key=True, max_length=40)
    client_id: str = Field(max_length=512, unique=True)
    kind: ClientKind = _enum(ClientKind, 20)
    name: str | None = Field(default=None, max_length=120)
    redirect_uris: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    grant_types: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    token_endpoint_auth_method: str = Field(max_length=30)
    application_type: str | None = Field(default=None, max_length=10)
    scope: str | None = Field(default=None, max_length=400)
    secret_hash: str | None = Field(default=None, max_length=64)
    client_uri: str | None = Field(default=None, max_length=512)
    org_id: str | None = Field(default=None, foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str | None = Field(default=None, foreign_key="agents.id", max_length=40)
    document_etag: str | None = Field(default=None, max_length=200)
    fetched_at: datetime | None = _ts(nullable=True)
    stale_at: datetime | None = _ts(nullable=True)  # a metadata document is fetched again after this
    created_by: str = Field(max_length=160)
    created_at: datetime = _ts()
    last_used_at: datetime | None = _ts(nullable=True)
    disabled_at: datetime | None = _ts(nullable=True)


class OAuthGrant(SQLModel, table=True):
    """A connection: one client may act for one agent with these scopes, because a member said so
    on the consent page (or an operator created an admin client). Revoking it revokes every token
    it led to."""

    __tablename__ = "oauth_grants"
    __table_args__ = (Index("ix_oauth_grants_client_agent", "client_id", "agent_id"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    client_id: str = Field(foreign_key="oauth_clients.id", max_length=40)
    member_id: str | None = Field(default=None, foreign_key="members.id", max_length=40)
    scopes: str = Field(max_length=400)
    resource: str = Field(max_length=400)
    redirect_uri: str | None = Field(default=None, max_length=2048)
    created_by: str = Field(max_length=160)
    created_at: datetime = _ts()
    updated_at: datetime = _ts()
    last_used_at: datetime | None = _ts(nullable=True)
    revoked_at: datetime | None = _ts(nullable=True)
    revoked_by: str | None = Field(default=None, max_length=160)


class AuthorizationCode(SQLModel, table=True):
    """A one-time authorization code, bound to its client, redirect URI, PKCE challenge and
    resource. Only its SHA-256 is kept; `family_id` names the tokens it was exchanged for."""

    __tablename__ = "oauth_codes"

    code_hash: str = Field(primary_key=True, max_length=64)
    client_id: str = Field(foreign_key="oauth_clients.id", max_length=40)
    grant_id: str = Field(foreign_key="oauth_grants.id", index=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    member_id: str = Field(foreign_key="members.id", max_length=40)
    redirect_uri: str = Field(max_length=2048)
    code_challenge: str = Field(max_length=128)
    resource: str = Field(max_length=400)
    scopes: str = Field(max_length=400)
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)
    used_at: datetime | None = _ts(nullable=True)
    family_id: str | None = Field(default=None, max_length=40)


class MemberPasskey(SQLModel, table=True):
    """A member's passkey (a WebAuthn credential): its id as base64url, its public key (COSE) and
    the signature counter it last showed."""

    __tablename__ = "member_passkeys"

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    member_id: str = Field(foreign_key="members.id", index=True, max_length=40)
    credential_id: str = Field(max_length=1400, unique=True)
    public_key: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    sign_count: int = Field(sa_column=Column(BigInteger, nullable=False))
    name: str = Field(max_length=60)
    transports: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: datetime = _ts()
    last_used_at: datetime | None = _ts(nullable=True)


class WebSession(SQLModel, table=True):
    """A member's browser session. The cookie holds a random secret; the row's id is its SHA-256."""

    __tablename__ = "web_sessions"

    id: str = Field(primary_key=True, max_length=64)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    member_id: str = Field(foreign_key="members.id", index=True, max_length=40)
    passkey_id: str | None = Field(default=None, max_length=40)
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)
    revoked_at: datetime | None = _ts(nullable=True)


class WebAuthnChallenge(SQLModel, table=True):
    """A WebAuthn challenge handed to a page: answered once, before it expires, for its purpose."""

    __tablename__ = "webauthn_challenges"

    id: str = Field(primary_key=True, max_length=40)
    purpose: ChallengePurpose = _enum(ChallengePurpose, 20)
    challenge: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    member_id: str | None = Field(default=None, foreign_key="members.id", max_length=40)
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)
    used_at: datetime | None = _ts(nullable=True)
    # A decision on an approval: the challenge commits to this approval's payment and to `nonce`
    # (see server/approvals/confirmation.py), and is recomputed from both rows when answered.
    approval_id: str | None = Field(default=None, foreign_key="approvals.id", max_length=40)
    nonce: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    # A decision on a policy change an agent asked for: the challenge commits to the change's hash,
    # the versions it would change and `nonce` (server/approvals/confirmation.py).
    policy_change_id: str | None = Field(default=None, foreign_key="policy_change_requests.id", max_length=40)


class StepUp(SQLModel, table=True):
    """A fresh, user-verified passkey assertion asked for before a change a session alone may not
    make (adding a passkey). Bound to one member, one session and one action; answered once and
    redeemed once, both before `expires_at`. The signed challenge is recomputed from this row."""

    __tablename__ = "step_ups"

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    member_id: str = Field(foreign_key="members.id", index=True, max_length=40)
    session_id: str = Field(max_length=64)  # no foreign key: expired sessions are purged
    action: StepUpAction = _enum(StepUpAction, 20)
    nonce: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)
    # Claimed before its answer is checked (so it is answered once, even when the answer fails);
    # `passkey_id` is set only once the answer verified, and redemption needs it.
    answered_at: datetime | None = _ts(nullable=True)
    passkey_id: str | None = Field(default=None, max_length=40)
    redeemed_at: datetime | None = _ts(nullable=True)
    # A confirmation of one pending change: the challenge also commits to that change's hash.
    pending_change_id: str | None = Field(default=None, foreign_key="pending_changes.id", max_length=40)


class PendingChange(SQLModel, table=True):
    """A change asked for with an admin token that widens authority: stored as asked, applied only
    when a member confirms it with a passkey whose challenge commits to `change_hash`, before
    `expires_at`. `result_sealed` holds what the confirming member is shown once (a new token's
    secret, sealed with the master key) until that member's page has shown it."""

    __tablename__ = "pending_changes"

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", index=True, max_length=40)
    kind: PendingChangeKind = _enum(PendingChangeKind, 20)
    asked_by: str = Field(max_length=80)  # the admin token's actor, "token:tok_..."
    subject_id: str = Field(max_length=40)  # the agent or the member it changes
    change_json: str = Field(sa_column=Column(Text, nullable=False))
    change_hash: str = Field(max_length=64)  # SHA-256 of change_json, hex
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)
    confirmed_at: datetime | None = _ts(nullable=True)
    confirmed_by: str | None = Field(default=None, foreign_key="members.id", max_length=40)
    result_sealed: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    result_key_id: str | None = Field(default=None, max_length=16)  # the master key it is sealed with


class PolicyChangeRequest(SQLModel, table=True):
    """More room an agent asked for (request_policy_change): the exact change as canonical JSON
    with its SHA-256, and the agent's note, which is untrusted text. Nothing changes until an
    owner or admin approves it with a passkey whose challenge commits to `change_hash`; then the
    change is made as that member. `policy_version` is the version in force when it was asked;
    `applied_version` the one the approval made (None when the change named only rules)."""

    __tablename__ = "policy_change_requests"
    __table_args__ = (
        Index("ix_policy_change_requests_agent_status", "agent_id", "status"),
        Index("ix_policy_change_requests_org_status", "org_id", "status"),
    )

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    status: PolicyChangeStatus = _enum(PolicyChangeStatus, 12)
    asked_by: str = Field(max_length=80)  # the agent's actor, "agent:agt_..."
    note: str = Field(sa_column=Column(Text, nullable=False))
    change_json: str = Field(sa_column=Column(Text, nullable=False))
    change_hash: str = Field(max_length=64)  # SHA-256 of change_json, hex
    policy_version: int
    created_at: datetime = _ts()
    expires_at: datetime = _ts(index=True)
    decided_at: datetime | None = _ts(nullable=True)
    decided_by: str | None = Field(default=None, foreign_key="members.id", max_length=40)
    applied_version: int | None = None


class RateLimitBucket(SQLModel, table=True):
    """A fixed-window counter of requests for one key (an endpoint and who calls it), shared by
    every server process through the database."""

    __tablename__ = "rate_limit_buckets"

    key: str = Field(primary_key=True, max_length=200)
    window_start: int = Field(sa_column=Column(BigInteger, nullable=False))
    count: int = Field(sa_column=Column(Integer, nullable=False))
    expires_at: datetime = _ts(index=True)


class ClientDocumentFailure(SQLModel, table=True):
    """A client ID metadata document that could not be fetched or used, remembered until
    `retry_at` so that nobody can make Paywarden fetch a failing URL again and again. Keyed by the
    SHA-256 of the URL; shared by every server process through the database."""

    __tablename__ = "oauth_document_failures"

    url_hash: str = Field(primary_key=True, max_length=64)
    url: str = Field(max_length=500)
    reason: str = Field(max_length=40)
    failed_at: datetime = _ts()
    retry_at: datetime = _ts(index=True)


class PaymentIntent(SQLModel, table=True):
    """One purchase: what the seller asked, what the policy decided, what was signed and settled."""

    __tablename__ = "payment_intents"
    __table_args__ = (
        UniqueConstraint("agent_id", "idempotency_key"),
        UniqueConstraint("payer", "nonce"),
        # list_payments: an agent's newest first (created_at, id), and the same for one status.
        Index("ix_payment_intents_agent_created_id", "agent_id", "created_at", "id"),
        Index("ix_payment_intents_agent_status_created", "agent_id", "status", "created_at", "id"),
        Index("ix_payment_intents_org_authorized", "org_id", "authorized_at"),
        Index("ix_payment_intents_status_valid_before", "status", "valid_before"),
        Index("ix_payment_intents_org_pay_to", "org_id", "pay_to"),
        Index("ix_payment_intents_host_submitted", "host", "submitted_at"),
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
    # The receipt: what was agreed and what came back, never the body itself. `terms_sha256` is
    # the SHA-256 of the paid `accepts` entry as canonical JSON; the body's digest and size are
    # of the bytes as received (`body_truncated` when they are not all the seller meant to send);
    # `payment_response` is the seller's settlement header as received, a claim, never proof.
    terms_sha256: str | None = Field(default=None, max_length=64)
    body_sha256: str | None = Field(default=None, max_length=64)
    body_bytes: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))
    body_truncated: bool | None = None
    content_type: str | None = Field(default=None, max_length=80)
    payment_response: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # Who sent the signed payment (pay_x402 hands it to the agent), and, for the agent, the header
    # it was handed: sealed with the master key, so a replay with the same key hands over the same
    # header and nothing is signed twice.
    sent_by: PaymentSender = Field(
        default=PaymentSender.PAYWARDEN,
        sa_column=Column(EnumColumn(PaymentSender, 10), nullable=False, server_default="paywarden"),
    )
    payment_header_sealed: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    payment_header_key_id: str | None = Field(default=None, max_length=16)  # the master key it is sealed with


class SellerCircuit(SQLModel, table=True):
    """A host blocked for an organisation after repeated paid-but-not-delivered outcomes: open from
    `opened_at` until `open_until`, or until a member clears it."""

    __tablename__ = "seller_circuits"
    __table_args__ = (Index("ix_seller_circuits_org_host", "org_id", "host"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    host: str = Field(max_length=255)
    failures: int
    opened_at: datetime = _ts()
    open_until: datetime = _ts()
    cleared_at: datetime | None = _ts(nullable=True)
    cleared_by: str | None = Field(default=None, max_length=40)  # the member who cleared it


class Approval(SQLModel, table=True):
    """A held payment waiting for (or decided by) a human. It belongs to one intent, whose
    idempotency key the agent retries with once the approval is granted. `decision` records the
    hold reasons it covers (`holdReasons`) and the hold rules behind them (`rules`)."""

    __tablename__ = "approvals"
    __table_args__ = (
        Index("ix_approvals_org_status", "org_id", "status"),
        Index("ix_approvals_agent_status", "agent_id", "status"),
    )

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    agent_id: str = Field(foreign_key="agents.id", max_length=40)
    # One intent may see several approvals in turn (a retry that met a new hold reason supersedes
    # the old one); at most one of them is not superseded.
    intent_id: str = Field(foreign_key="payment_intents.id", index=True, max_length=40)
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


class ApprovalNotification(SQLModel, table=True):
    """The outbox of announcements (a Slack message) of pending approvals and of passkeys added or
    removed: one row per approval or audit event, claimed by one process, sent at most once."""

    __tablename__ = "approval_notifications"
    __table_args__ = (Index("ix_approval_notifications_org_status", "org_id", "status"),)

    id: str = Field(primary_key=True, max_length=40)
    org_id: str = Field(foreign_key="organizations.id", max_length=40)
    # What it announces: a pending approval, or an account change (a passkey added or removed,
    # as its audit event).
    approval_id: str | None = Field(default=None, foreign_key="approvals.id", max_length=40, unique=True)
    audit_event_id: str | None = Field(
        default=None, foreign_key="audit_events.id", max_length=40, unique=True
    )
    status: NotificationStatus = _enum(NotificationStatus, 12)
    created_at: datetime = _ts()
    claimed_by: str | None = Field(default=None, max_length=120)
    claimed_at: datetime | None = _ts(nullable=True)
    finished_at: datetime | None = _ts(nullable=True, index=True)
    # How many approvals the message announced: 1, or more for a summary; 0 when none was sent.
    announced: int = Field(default=0)
    error: str | None = Field(default=None, max_length=40)


class CatalogEntry(SQLModel, table=True):
    """A seller in the catalog, one per exact host.

    Everything but `seller_description` is the operator's own text or a fact Paywarden checked;
    `seller_description` is what the seller says of itself, kept as untrusted text. An entry with
    no `accepted_at` is a candidate (imported, waiting for an operator) and is not listed.
    `pinned_pay_to` holds the seller's known receiving addresses, lower-case; an empty list means
    it rotates its address (`pay_to_mode` rotating). `verified_at` is the last time the example
    request answered a challenge Paywarden can pay; `checked_at` the last attempt, and
    `check_error` what went wrong with it. `search_title` and `search_body` are the entry's own
    words, normalised for full-text search (see server/catalog/text.py); the full-text index over
    them lives outside the model (server/models/search.py).
    """

    __tablename__ = "catalog_entries"

    id: str = Field(primary_key=True, max_length=40)
    host: str = Field(max_length=255, unique=True)
    name: str = Field(max_length=120)
    url: str = Field(max_length=2048)
    method: str = Field(default="GET", max_length=10)
    example_body: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    category: str = Field(max_length=40)
    summary: str = Field(default="", max_length=500)
    seller_description: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    source: CatalogSource = _enum(CatalogSource, 10)
    pay_to_mode: PayToMode = _enum(PayToMode, 10)
    pinned_pay_to: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    observed_pay_to: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    instruction_like: bool = False  # the last verified 402 read like orders to an agent
    created_by: str = Field(max_length=160)
    created_at: datetime = _ts()
    accepted_at: datetime | None = _ts(nullable=True)
    verified_at: datetime | None = _ts(nullable=True)
    checked_at: datetime | None = _ts(nullable=True)
    check_error: str | None = Field(default=None, max_length=60)
    suspended_at: datetime | None = _ts(nullable=True)
    suspension_reason: SuspensionReason | None = _enum(SuspensionReason, 20, nullable=True)
    search_title: str = Field(default="", sa_column=Column(Text, nullable=False))
    search_body: str = Field(default="", sa_column=Column(Text, nullable=False))


class CatalogOffer(SQLModel, table=True):
    """What a catalog seller charges on one network: exact USDC, as last verified (or as the
    operator declared it, until the first verification)."""

    __tablename__ = "catalog_offers"

    entry_id: str = Field(foreign_key="catalog_entries.id", primary_key=True, max_length=40)
    network: str = Field(primary_key=True, max_length=40)
    amount_atomic: int = Field(sa_column=Column(BigInteger, nullable=False))
    pay_to: str | None = Field(default=None, max_length=42)  # None until verified


class AuditEvent(SQLModel, table=True):
    """Append-only; each organisation's events form a keyed hash chain ordered by `seq`.

    Triggers refuse UPDATE and DELETE (migration 20261130_0008). A later migration that rebuilds
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


class AuditHead(SQLModel, table=True):
    """Each organisation's newest audit event: its `seq` and `hash`. Appending advances this row in
    one conditional statement, whose row lock orders the chain until the transaction commits, so
    no lock on the organisation is held across the work that precedes the event."""

    __tablename__ = "audit_heads"

    org_id: str = Field(primary_key=True, foreign_key="organizations.id", max_length=40)
    seq: int
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


class SealedSecret(SQLModel, table=True):
    """A secret of the database itself, sealed with the master key, by name. Today one: the audit
    chain's key, stored here when the master key is first rotated (until then it is derived from
    the master key), so events keyed before a rotation keep verifying after it."""

    __tablename__ = "sealed_secrets"

    name: str = Field(primary_key=True, max_length=60)
    sealed: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    key_id: str = Field(max_length=16)  # the master key it is sealed with
    created_at: datetime = _ts()


class JobLease(SQLModel, table=True):
    """Which process runs a background job now. A lease that is not renewed lapses."""

    __tablename__ = "job_leases"

    name: str = Field(primary_key=True, max_length=60)
    holder: str = Field(max_length=120)
    expires_at: datetime = _ts()
