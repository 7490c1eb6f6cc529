"""The admin API's documents, as pydantic models: the handlers render through them and the OpenAPI
document is generated from them, so the two cannot disagree."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from auth.scopes import AGENT_SCOPES
from auth.tokens import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS, MIN_TTL_SECONDS
from server.approvals.notifications import MAX_WEBHOOK_URL
from server.kit.money import format_usd
from server.models import (
    AccessToken,
    Agent,
    AuditEvent,
    CatalogEntry,
    CatalogOffer,
    Member,
    Organization,
    PaymentIntent,
    SellerCircuit,
    Team,
    Wallet,
    WalletSweep,
)
from server.payments.sweeps.listing import AgentWallets
from server.payments.wallet_health import BalanceUnknown
from server.policy.rules import Rule
from server.vocabulary import (
    SUPPORTED_NETWORKS,
    Role,
    RuleKind,
    RuleScope,
    RuleWindow,
    SweepStatus,
    WalletMode,
)

# The scopes an agent token may carry, spelled out so the OpenAPI document lists them.
AgentScope = Literal["catalog:read", "payments:read", "payments:write", "policy:request", "rules:propose"]
assert set(get_args(AgentScope)) == {str(scope) for scope in AGENT_SCOPES}


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentDocument(Document):
    id: str
    name: str
    network: str = Field(description="The CAIP-2 network the agent pays on.")
    teamId: str | None
    memberId: str | None = Field(description="The member the agent belongs to, if it is one's own.")
    createdAt: datetime
    disabled: bool

    @classmethod
    def of(cls, agent: Agent) -> AgentDocument:
        return cls(
            id=agent.id,
            name=agent.name,
            network=agent.network,
            teamId=agent.team_id,
            memberId=agent.member_id,
            createdAt=agent.created_at,
            disabled=agent.disabled_at is not None,
        )


class AgentList(Document):
    agents: list[AgentDocument]


class PaymentDocument(Document):
    id: str
    agentId: str
    status: str
    host: str
    resource: str = Field(description="The URL paid for, without its query string.")
    payTo: str
    amountAtomic: int = Field(description="USDC in its smallest unit (6 decimals).")
    amountUsd: str
    network: str
    transaction: str | None = Field(description="The transfer's hash, once found on chain.")
    failureCode: str | None
    createdAt: datetime
    termsSha256: str | None = Field(
        description="SHA-256 (hex) of the paid accepts entry as canonical JSON: the terms agreed to."
    )
    bodySha256: str | None = Field(
        description="SHA-256 (hex) of the body the seller served, as received; the body is not kept."
    )
    bodyBytes: int | None = Field(description="How many bytes of the body were received.")
    bodyTruncated: bool | None = Field(
        description="True when the bytes received are not the whole body (cut at the size cap or broken off)."
    )
    contentType: str | None = Field(description="The body's media type, type/subtype only.")
    paymentResponse: str | None = Field(
        description="The seller's PAYMENT-RESPONSE header as received (bounded): its claim, never proof "
        "of settlement, which comes only from the chain (`transaction`). For a payment the agent sent, "
        "what the agent reported."
    )
    sentBy: str = Field(
        description="Who sent the signed payment to the seller: `paywarden` (fetch_paid) or `agent` "
        "(pay_x402 handed it the header)."
    )

    @classmethod
    def of(cls, intent: PaymentIntent) -> PaymentDocument:
        return cls(
            id=intent.id,
            agentId=intent.agent_id,
            status=str(intent.status),
            host=intent.host,
            resource=intent.resource,
            payTo=intent.pay_to,
            amountAtomic=intent.amount_atomic,
            amountUsd=format_usd(intent.amount_atomic, atomic=True),
            network=intent.network,
            transaction=intent.tx_hash,
            failureCode=intent.failure_code,
            createdAt=intent.created_at,
            termsSha256=intent.terms_sha256,
            bodySha256=intent.body_sha256,
            bodyBytes=intent.body_bytes,
            bodyTruncated=intent.body_truncated,
            contentType=intent.content_type,
            paymentResponse=intent.payment_response,
            sentBy=str(intent.sent_by),
        )


class PaymentPage(Document):
    payments: list[PaymentDocument]
    nextCursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class AuditVerification(Document):
    intact: bool
    brokenAtSeq: int | None = Field(description="The first link that does not verify, if any.")
    reason: str | None


class MemberDocument(Document):
    id: str
    email: str
    role: Role
    enrolled: bool = Field(description="Whether the member has enrolled a passkey (used the link).")
    disabled: bool
    createdAt: datetime

    @classmethod
    def of(cls, member: Member) -> MemberDocument:
        return cls(
            id=member.id,
            email=member.email,
            role=member.role,
            enrolled=member.enroll_token_hash is None,
            disabled=member.disabled_at is not None,
            createdAt=member.created_at,
        )


class MemberList(Document):
    members: list[MemberDocument]


class RoleChange(Document):
    role: Role


class MemberInvite(Document):
    email: str = Field(min_length=3, max_length=254, description="The new member's email.")
    role: Role = Role.APPROVER


class TeamDocument(Document):
    id: str
    name: str
    createdAt: datetime

    @classmethod
    def of(cls, team: Team) -> TeamDocument:
        return cls(id=team.id, name=team.name, createdAt=team.created_at)


class TeamList(Document):
    teams: list[TeamDocument]


class PolicyDocument(Document):
    agentId: str
    policyVersion: int = Field(description="Each change makes a new version; payments name theirs.")
    policy: dict[str, Any] = Field(
        description="The rules in force, as `paywarden admin policy show` prints them."
    )


class PolicyNarrowing(Document):
    """Settings to narrow; each left out stays as it is. A list replaces the whole list."""

    maxUsdPerTx: str | None = Field(default=None, description="USD, no higher than now.", max_length=20)
    dailyCapUsd: str | None = Field(default=None, description="USD, no higher than now.", max_length=20)
    allowHosts: list[str] | None = Field(default=None, description="Only hosts allowed now.")
    denyHosts: list[str] | None = Field(default=None, description="Every host denied now, and more.")


class ConfirmationRequired(Document):
    """A change that widens authority, stored and waiting: a member with the right role confirms it
    with a passkey at `confirmationUrl` before `expiresAt`, or nothing changes."""

    status: Literal["confirmation_required"] = "confirmation_required"
    changeId: str
    confirmationUrl: str = Field(description="The page where a member confirms the change with a passkey.")
    expiresAt: datetime


class ChangeDocument(Document):
    """A change an admin token asked for, and whether a member confirmed it."""

    id: str
    kind: Literal["policy", "new_credential", "role_change", "invite", "rule_change", "rule_removal"]
    subjectId: str = Field(description="The agent, member, organisation or rule the change is about.")
    status: Literal["pending", "confirmed", "expired"]
    askedBy: str
    confirmedBy: str | None
    createdAt: datetime
    expiresAt: datetime
    confirmedAt: datetime | None


class TokenDocument(Document):
    id: str
    kind: Literal["agent", "admin"]
    agentId: str | None
    scopes: list[str]
    label: str | None
    createdBy: str
    createdAt: datetime
    expiresAt: datetime
    lastUsedAt: datetime | None = Field(description="Known for a connection's tokens (OAuth).")

    @classmethod
    def of(cls, row: AccessToken, *, last_used_at: datetime | None = None) -> TokenDocument:
        return cls(
            id=row.id,
            kind="agent" if row.agent_id is not None else "admin",
            agentId=row.agent_id,
            scopes=row.scopes.split(),
            label=row.label,
            createdBy=row.created_by,
            createdAt=row.created_at,
            expiresAt=row.expires_at,
            lastUsedAt=last_used_at,
        )


class TokenList(Document):
    tokens: list[TokenDocument] = Field(description="Tokens that still work; never their secret.")


class TokenIssue(Document):
    scopes: list[AgentScope] = Field(min_length=1)
    ttlSeconds: int = Field(default=DEFAULT_TTL_SECONDS, ge=MIN_TTL_SECONDS, le=MAX_TTL_SECONDS)
    label: str | None = Field(default=None, max_length=120)


class TokenIssued(Document):
    id: str
    token: str = Field(description="The bearer token: shown this once, only its hash is kept.")
    scopes: list[str]
    expiresAt: datetime


class ExportRow(Document):
    agent: str = Field(description="The agent's id.")
    day: str = Field(description="The UTC day the payment was created, YYYY-MM-DD.")
    host: str
    payee: str = Field(description="The address paid (payTo).")
    amount: str = Field(description="USD, as a decimal.")
    network: str
    transaction: str = Field(description="The transfer's hash; empty until found on chain.")
    termsSha256: str = Field(description="SHA-256 (hex) of the paid accepts entry as canonical JSON.")
    bodySha256: str = Field(description="SHA-256 (hex) of the body served, as received; empty if none.")
    bodyBytes: str = Field(description="Bytes of the body received; empty if none.")
    bodyTruncated: str = Field(
        description="`true` when the body received was incomplete, else `false`; empty if none."
    )
    contentType: str = Field(description="The body's media type; empty if none.")
    paymentResponse: str = Field(
        description="The seller's PAYMENT-RESPONSE header as received; empty if none."
    )
    sentBy: str = Field(description="`paywarden` or `agent`: who sent the signed payment to the seller.")

    @classmethod
    def of(cls, intent: PaymentIntent) -> ExportRow:
        return cls(
            agent=intent.agent_id,
            day=intent.created_at.date().isoformat(),
            host=intent.host,
            payee=intent.pay_to,
            amount=format_usd(intent.amount_atomic, atomic=True),
            network=intent.network,
            transaction=intent.tx_hash or "",
            termsSha256=intent.terms_sha256 or "",
            bodySha256=intent.body_sha256 or "",
            bodyBytes="" if intent.body_bytes is None else str(intent.body_bytes),
            bodyTruncated="" if intent.body_truncated is None else str(intent.body_truncated).lower(),
            contentType=intent.content_type or "",
            paymentResponse=intent.payment_response or "",
            sentBy=str(intent.sent_by),
        )


class PaymentExport(Document):
    rows: list[ExportRow]


class AuditEventDocument(Document):
    id: str
    seq: int = Field(description="The event's place in the organisation's hash chain.")
    kind: str = Field(description="The event's type, e.g. `agent.disabled`.")
    actor: str
    agentId: str | None
    subjectId: str | None
    data: dict[str, Any]
    createdAt: datetime
    hash: str

    @classmethod
    def of(cls, event: AuditEvent) -> AuditEventDocument:
        return cls(
            id=event.id,
            seq=event.seq,
            kind=event.type,
            actor=event.actor,
            agentId=event.agent_id,
            subjectId=event.subject_id,
            data=dict(event.data),
            createdAt=event.created_at,
            hash=event.hash,
        )


class AuditEventPage(Document):
    events: list[AuditEventDocument]
    nextCursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class ConnectionDocument(Document):
    id: str = Field(description="The grant's id: revoke it with DELETE /connections/{id}.")
    clientName: str
    clientId: str
    how: str = Field(description="How the client came to be known, in words.")
    agentId: str
    agentName: str
    scopes: list[str]
    grantedBy: str | None = Field(description="The member who consented, if one did.")
    createdAt: datetime
    lastUsedAt: datetime | None


class ConnectionList(Document):
    connections: list[ConnectionDocument]


class ApprovalDocument(Document):
    id: str
    status: str = Field(description="As of now: a pending approval past its time is `expired`.")
    agentId: str
    intentId: str
    amountUsd: str
    host: str
    resource: str
    payTo: str
    network: str
    reason: str
    holdReasons: list[str]
    createdAt: datetime
    expiresAt: datetime
    decidedAt: datetime | None
    decidedBy: str | None = Field(description="The member who decided, with a passkey.")
    decideAt: str = Field(description="The passkey page where a member decides it.")


class ApprovalList(Document):
    approvals: list[ApprovalDocument]


class UntrustedText(Document):
    untrusted: bool = Field(description="Always true: words an agent wrote, never checked by Paywarden.")
    text: str


class PolicyChangeDocument(Document):
    id: str
    status: str = Field(description="pending, approved, rejected or expired (as of now).")
    agentId: str
    change: dict[str, Any] = Field(description="The change as asked for and stored (request_policy_change).")
    note: UntrustedText = Field(description="The agent's note: its own words, untrusted.")
    policyVersion: int = Field(description="The agent's policy version when it asked.")
    appliedPolicyVersion: int | None = Field(description="The version the approval made, if it made one.")
    createdAt: datetime
    expiresAt: datetime
    decidedAt: datetime | None
    decidedBy: str | None = Field(description="The member who decided, with a passkey.")
    decideAt: str = Field(description="The passkey page where an owner or admin decides it.")


class PolicyChangeList(Document):
    policyChanges: list[PolicyChangeDocument]


class ProblemDocument(Document):
    type: str = Field(description="urn:paywarden:problem:<code>")
    title: str
    status: int
    detail: str
    code: str


# The networks an agent may pay on, spelled out so the OpenAPI document lists them.
Network = Literal["eip155:8453", "eip155:84532"]
assert set(get_args(Network)) == set(SUPPORTED_NETWORKS)


class AgentCreate(Document):
    name: str = Field(min_length=1, max_length=120, description="Unique in the organisation.")
    network: Network = Field(description="The CAIP-2 network the agent pays on.")
    teamId: str | None = Field(
        default=None, max_length=40, description="Its team: the team's rules apply too."
    )
    memberId: str | None = Field(default=None, max_length=40, description="The member it belongs to.")


class OrganizationDocument(Document):
    id: str
    name: str
    approvalTtlSeconds: int = Field(description="How long a held payment waits for a decision.")
    slackWebhook: str | None = Field(
        description="The Slack webhook approvals are announced to, masked (never returned whole); "
        "null when none is set."
    )
    circuitFailures: int = Field(
        description="Paid calls to one host that deliver nothing before it is blocked."
    )
    circuitWindowHours: int = Field(description="The hours those failures are counted over.")
    createdAt: datetime

    @classmethod
    def of(cls, org: Organization) -> OrganizationDocument:
        return cls(
            id=org.id,
            name=org.name,
            approvalTtlSeconds=org.approval_ttl_seconds,
            slackWebhook=org.slack_webhook_masked,
            circuitFailures=org.circuit_failures,
            circuitWindowHours=org.circuit_window_hours,
            createdAt=org.created_at,
        )


class OrganizationChange(Document):
    """Settings to change; each left out stays as it is."""

    name: str | None = Field(default=None, min_length=1, max_length=120)
    approvalTtlSeconds: int | None = Field(
        default=None, description="300 (5 minutes) to 86400 (24 hours), as the settings page offers."
    )
    slackWebhookUrl: str | None = Field(
        default=None,
        max_length=MAX_WEBHOOK_URL,
        description="An https URL on hooks.slack.com; `null` removes the webhook. Never shown again.",
    )
    circuitFailures: int | None = Field(default=None, description="1 to 100 (the seller circuit breaker).")
    circuitWindowHours: int | None = Field(default=None, description="1 to 720 hours.")


class RuleDocument(Document):
    id: str
    version: int = Field(description="Each change writes the rule's next version.")
    scope: RuleScope
    scopeId: str = Field(description="The agent, team, member or organisation it is for.")
    kind: RuleKind
    host: str | None
    pathPrefix: str | None
    limitUsd: str | None = Field(description="For a limit: USD per window.")
    window: RuleWindow | None
    source: str = Field(description="Who made it: admin, default, or chat (an agent's proposal).")
    expiresAt: datetime | None

    @classmethod
    def of(cls, rule: Rule, scope_id: str) -> RuleDocument:
        return cls(
            id=rule.id,
            version=rule.version,
            scope=rule.scope,
            scopeId=scope_id,
            kind=rule.kind,
            host=rule.host,
            pathPrefix=rule.path_prefix,
            limitUsd=None if rule.limit_atomic is None else format_usd(rule.limit_atomic, atomic=True),
            window=rule.window,
            source=str(rule.source),
            expiresAt=rule.expires_at,
        )


class RuleList(Document):
    rules: list[RuleDocument] = Field(description="The rules in force, oldest first.")


class RuleCreate(Document):
    scope: RuleScope
    scopeId: str = Field(min_length=1, max_length=120, description="The agent, team, member or organisation.")
    kind: RuleKind
    host: str | None = Field(
        default=None, max_length=255, description="Only payments to this host (or *.domain)."
    )
    pathPrefix: str | None = Field(default=None, max_length=512, description="Only paths starting with this.")
    limitUsd: str | None = Field(default=None, max_length=20, description="For a limit: USD per window.")
    window: RuleWindow | None = Field(default=None, description="For a limit (default day).")


class RuleChange(Document):
    limitUsd: str = Field(max_length=20, description="The limit rule's new limit, USD per window.")


BalanceError = Literal["no_wallet", "chain_unavailable", "timeout"]


class WalletDocument(Document):
    agentId: str
    network: str
    address: str | None = Field(description="The wallet's address; null when the agent has none.")
    mode: WalletMode | None = Field(
        description="How it signs: `local_key`, a key sealed in Paywarden; `cdp`, a key kept at Coinbase "
        "CDP. The key is never returned."
    )
    balanceUsd: str | None = Field(
        description="Its USDC balance read from the chain now; null when unreadable."
    )
    balanceAtomic: int | None
    balanceError: BalanceError | None = Field(
        description="Why there is no balance: no wallet, no answer from the chain, or none in time."
    )

    @classmethod
    def of(
        cls, agent: Agent, wallet: Wallet | None, balance: int | None, error: BalanceError | None
    ) -> WalletDocument:
        return cls(
            agentId=agent.id,
            network=agent.network,
            address=None if wallet is None else wallet.address,
            mode=None if wallet is None else wallet.mode,
            balanceUsd=None if balance is None else format_usd(balance, atomic=True),
            balanceAtomic=balance,
            balanceError=error,
        )


class NetworkBalanceDocument(Document):
    network: str
    balanceUsd: str | None = Field(description="The USDC balance read from the chain now; null when unknown.")
    balanceAtomic: int | None
    balanceError: BalanceUnknown | None = Field(
        description="Why there is no balance: no RPC for the network, no answer, or none in time."
    )


class SweepDocument(Document):
    sweepId: str
    network: str
    status: SweepStatus
    fromAddress: str = Field(description="The retired wallet swept.")
    toAddress: str = Field(description="The agent's wallet it paid: its current one when authorised.")
    amountUsd: str
    amountAtomic: int
    txHash: str | None = Field(description="The transaction that moved it, once known.")
    failureCode: str | None
    createdAt: datetime
    endedAt: datetime | None

    @classmethod
    def of(cls, row: WalletSweep) -> SweepDocument:
        return cls(
            sweepId=row.id,
            network=row.network,
            status=row.status,
            fromAddress=row.payer,
            toAddress=row.pay_to,
            amountUsd=format_usd(row.amount_atomic, atomic=True),
            amountAtomic=row.amount_atomic,
            txHash=row.tx_hash,
            failureCode=row.failure_code,
            createdAt=row.created_at,
            endedAt=row.ended_at,
        )


class ListedWalletDocument(Document):
    walletId: str
    address: str
    mode: WalletMode
    state: Literal["current", "retired"] = Field(description="A retired wallet signs nothing new.")
    createdAt: datetime
    retiredAt: datetime | None
    balances: list[NetworkBalanceDocument]
    sweeps: list[SweepDocument] = Field(description="Its sweeps, newest first.")


class WalletList(Document):
    agentId: str
    wallets: list[ListedWalletDocument] = Field(description="The current wallet, then the retired ones.")

    @classmethod
    def of(cls, found: AgentWallets) -> WalletList:
        return cls(
            agentId=found.agent.id,
            wallets=[
                ListedWalletDocument(
                    walletId=item.wallet.id,
                    address=item.wallet.address,
                    mode=item.wallet.mode,
                    state="current" if item.current else "retired",
                    createdAt=item.wallet.created_at,
                    retiredAt=item.wallet.retired_at,
                    balances=[
                        NetworkBalanceDocument(
                            network=entry.network,
                            balanceUsd=None
                            if entry.balance_atomic is None
                            else format_usd(entry.balance_atomic, atomic=True),
                            balanceAtomic=entry.balance_atomic,
                            balanceError=entry.reason,
                        )
                        for entry in item.balances
                    ],
                    sweeps=[SweepDocument.of(row) for row in item.sweeps],
                )
                for item in found.wallets
            ],
        )


class CatalogOfferDocument(Document):
    network: str
    amountAtomic: int
    amountUsd: str
    payTo: str | None = Field(description="The address the last verification saw; null until verified.")

    @classmethod
    def of(cls, offer: CatalogOffer) -> CatalogOfferDocument:
        return cls(
            network=offer.network,
            amountAtomic=offer.amount_atomic,
            amountUsd=format_usd(offer.amount_atomic, atomic=True),
            payTo=offer.pay_to,
        )


class CatalogEntryDocument(Document):
    id: str
    host: str
    name: str
    url: str = Field(description="The example request the catalog verifies.")
    method: str
    category: str
    summary: str
    status: Literal["listed", "suspended"]
    payToMode: str = Field(description="pinned (known payees) or rotating.")
    pinnedPayTo: list[str]
    offers: list[CatalogOfferDocument]
    verifiedAt: datetime | None
    createdAt: datetime

    @classmethod
    def of(cls, entry: CatalogEntry, offers: tuple[CatalogOffer, ...]) -> CatalogEntryDocument:
        return cls(
            id=entry.id,
            host=entry.host,
            name=entry.name,
            url=entry.url,
            method=entry.method,
            category=entry.category,
            summary=entry.summary,
            status="suspended" if entry.suspended_at is not None else "listed",
            payToMode=str(entry.pay_to_mode),
            pinnedPayTo=list(entry.pinned_pay_to),
            offers=[CatalogOfferDocument.of(offer) for offer in offers],
            verifiedAt=entry.verified_at,
            createdAt=entry.created_at,
        )


class CatalogPage(Document):
    entries: list[CatalogEntryDocument]
    nextCursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class CircuitDocument(Document):
    host: str
    failures: int = Field(description="The undelivered paid calls that opened it.")
    openedAt: datetime
    openUntil: datetime
    clearedAt: datetime | None
    clearedBy: str | None

    @classmethod
    def of(cls, row: SellerCircuit) -> CircuitDocument:
        return cls(
            host=row.host,
            failures=row.failures,
            openedAt=row.opened_at,
            openUntil=row.open_until,
            clearedAt=row.cleared_at,
            clearedBy=row.cleared_by,
        )


class CircuitList(Document):
    circuits: list[CircuitDocument]
