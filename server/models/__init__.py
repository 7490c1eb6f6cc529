"""Tables. Every schema change is an Alembic migration; tests build the schema from migrations.

Models import only `server.kit`; services and repositories import models, never the reverse.
"""

from server.models.base import metadata
from server.models.tables import (
    AccessToken,
    Agent,
    Approval,
    AuditEvent,
    AuthorizationCode,
    CatalogEntry,
    CatalogOffer,
    ChainScanCursor,
    JobLease,
    Member,
    MemberPasskey,
    OAuthClient,
    OAuthGrant,
    Organization,
    OutOfPolicyFinding,
    PaymentIntent,
    PolicyVersion,
    RateLimitBucket,
    RuleVersion,
    Team,
    Wallet,
    WebAuthnChallenge,
    WebSession,
)

__all__ = [
    "AccessToken",
    "Agent",
    "Approval",
    "AuditEvent",
    "AuthorizationCode",
    "CatalogEntry",
    "CatalogOffer",
    "ChainScanCursor",
    "JobLease",
    "Member",
    "MemberPasskey",
    "OAuthClient",
    "OAuthGrant",
    "Organization",
    "OutOfPolicyFinding",
    "PaymentIntent",
    "PolicyVersion",
    "RateLimitBucket",
    "RuleVersion",
    "Team",
    "Wallet",
    "WebAuthnChallenge",
    "WebSession",
    "metadata",
]
