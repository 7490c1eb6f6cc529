"""Tables. Every schema change is an Alembic migration; tests build the schema from migrations.

Models import only `server.kit`; services and repositories import models, never the reverse.
"""

from server.models.base import metadata
from server.models.tables import (
    AccessToken,
    Agent,
    Approval,
    AuditEvent,
    CatalogEntry,
    ChainScanCursor,
    JobLease,
    MasterKeyCheck,
    Member,
    Organization,
    OutOfPolicyFinding,
    PaymentIntent,
    PolicyVersion,
    RuleVersion,
    Team,
    Wallet,
)

__all__ = [
    "AccessToken",
    "Agent",
    "Approval",
    "AuditEvent",
    "CatalogEntry",
    "ChainScanCursor",
    "JobLease",
    "MasterKeyCheck",
    "Member",
    "Organization",
    "OutOfPolicyFinding",
    "PaymentIntent",
    "PolicyVersion",
    "RuleVersion",
    "Team",
    "Wallet",
    "metadata",
]
