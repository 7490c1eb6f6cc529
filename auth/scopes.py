"""Token scopes and what each one unlocks (SPEC section 6)."""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    PAYMENTS_READ = "payments:read"  # get_budget, list_payments, get_approval_status, quote_payment
    PAYMENTS_WRITE = "payments:write"  # fetch_paid
    CATALOG_READ = "catalog:read"  # search_paid_apis, diagnose_payment
    RULES_PROPOSE = "rules:propose"  # propose_rule
    ADMIN = "admin"  # the admin API; never granted to an agent token


AGENT_SCOPES = frozenset({Scope.PAYMENTS_READ, Scope.PAYMENTS_WRITE, Scope.CATALOG_READ, Scope.RULES_PROPOSE})
ALL_SCOPES = frozenset(Scope)


class ScopeError(ValueError):
    pass


def parse_scopes(text: str, *, for_agent: bool) -> frozenset[Scope]:
    """Split a space-separated scope list; refuse unknown scopes and `admin` on agent tokens."""
    names = {part for part in text.split() if part}
    if not names:
        raise ScopeError("at least one scope is required")
    unknown = names - {str(scope) for scope in Scope}
    if unknown:
        raise ScopeError(f"unknown scope(s): {' '.join(sorted(unknown))}")
    scopes = frozenset(Scope(name) for name in names)
    if for_agent and Scope.ADMIN in scopes:
        raise ScopeError("the admin scope is never granted to an agent token")
    return scopes
