"""Token scopes and what each one unlocks."""

from __future__ import annotations

PAYMENTS_READ = "payments:read"
PAYMENTS_WRITE = "payments:write"
CATALOG_READ = "catalog:read"
RULES_PROPOSE = "rules:propose"
ADMIN = "admin"

AGENT_SCOPES = frozenset({PAYMENTS_READ, PAYMENTS_WRITE, CATALOG_READ, RULES_PROPOSE})
ALL_SCOPES = AGENT_SCOPES | {ADMIN}


class ScopeError(ValueError):
    pass


def parse_scopes(text: str, *, for_agent: bool) -> frozenset[str]:
    """Split a space-separated scope list; refuse unknown scopes and `admin` on agent tokens."""
    scopes = frozenset(part for part in text.split() if part)
    if not scopes:
        raise ScopeError("at least one scope is required")
    unknown = scopes - ALL_SCOPES
    if unknown:
        raise ScopeError(f"unknown scope(s): {' '.join(sorted(unknown))}")
    if for_agent and ADMIN in scopes:
        raise ScopeError("the admin scope is never granted to an agent token")
    return scopes
