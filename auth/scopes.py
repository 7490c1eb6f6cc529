"""Token scopes, what each one unlocks (SPEC section 6), and which scopes each tool needs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType


class Scope(StrEnum):
    PAYMENTS_READ = "payments:read"  # get_budget, list_payments, get_approval_status, quote_payment
    PAYMENTS_WRITE = "payments:write"  # fetch_paid, pay_x402, report_receipt
    CATALOG_READ = "catalog:read"  # search_paid_apis, diagnose_payment
    RULES_PROPOSE = "rules:propose"  # propose_rule
    POLICY_REQUEST = "policy:request"  # request_policy_change, get_policy_change_status
    ADMIN_READ = "admin:read"  # the admin API's reads; never granted to an agent token
    ADMIN_WRITE = "admin:write"  # the admin API's changes (and its reads)
    ADMIN = "admin"  # the scope admin tokens had before the split: read as admin:write


AGENT_SCOPES = frozenset(
    {Scope.PAYMENTS_READ, Scope.PAYMENTS_WRITE, Scope.CATALOG_READ, Scope.RULES_PROPOSE, Scope.POLICY_REQUEST}
)
READ_SCOPES = frozenset({Scope.PAYMENTS_READ, Scope.CATALOG_READ})
ALL_SCOPES = frozenset(Scope)
# Scopes that open the admin API; none of them is ever granted to an agent token.
ADMIN_SCOPES = frozenset({Scope.ADMIN_READ, Scope.ADMIN_WRITE, Scope.ADMIN})
_WRITERS = frozenset({Scope.ADMIN_WRITE, Scope.ADMIN})

# Understood in an authorization request (it asks for a refresh token) but never a permission:
# every client that may refresh gets a refresh token anyway, so nothing demands it.
OFFLINE_ACCESS = "offline_access"

# Every scope a call of each tool needs. The resource server challenges with these (HTTP 403)
# before a tool runs; the tools check the same scope themselves.
TOOL_SCOPES: Mapping[str, frozenset[Scope]] = MappingProxyType(
    {
        "get_budget": frozenset({Scope.PAYMENTS_READ}),
        "list_payments": frozenset({Scope.PAYMENTS_READ}),
        "get_approval_status": frozenset({Scope.PAYMENTS_READ}),
        "quote_payment": frozenset({Scope.PAYMENTS_READ}),
        "fetch_paid": frozenset({Scope.PAYMENTS_WRITE}),
        "pay_x402": frozenset({Scope.PAYMENTS_WRITE}),
        "report_receipt": frozenset({Scope.PAYMENTS_WRITE}),
        "search_paid_apis": frozenset({Scope.CATALOG_READ}),
        "diagnose_payment": frozenset({Scope.CATALOG_READ}),
        "propose_rule": frozenset({Scope.RULES_PROPOSE}),
        "request_policy_change": frozenset({Scope.POLICY_REQUEST}),
        "get_policy_change_status": frozenset({Scope.POLICY_REQUEST}),
    }
)

# What each scope lets an application do, as the consent page says it to a person.
SCOPE_DESCRIPTIONS: Mapping[Scope, str] = MappingProxyType(
    {
        Scope.PAYMENTS_READ: "See the agent's budget, payments and approvals, and ask what a URL would cost",
        Scope.PAYMENTS_WRITE: "Pay for URLs within the agent's spending policy",
        Scope.CATALOG_READ: "Search the catalog of paid APIs",
        Scope.RULES_PROPOSE: "Propose spending rules that can only narrow what the agent may pay",
        Scope.POLICY_REQUEST: (
            "Ask your organisation for more room (a host, a higher cap): nothing changes until an owner "
            "or admin approves it with a passkey"
        ),
    }
)


def scope_words(scopes: str) -> list[str]:
    """A space-separated scope list as the sentences a person reads (an unknown scope as itself)."""
    described: Mapping[str, str] = {str(scope): text for scope, text in SCOPE_DESCRIPTIONS.items()}
    return [described.get(name, name) for name in scopes.split()]


class ScopeError(ValueError):
    pass


def parse_scopes(text: str, *, for_agent: bool) -> frozenset[Scope]:
    """Split a space-separated scope list; refuse unknown scopes and `admin` on agent tokens."""
    names = {part for part in text.split() if part}
    if not names:
        raise ScopeError("at least one scope is required")
    unknown = names - {str(scope) for scope in Scope}
    if unknown:
        valid = AGENT_SCOPES if for_agent else ALL_SCOPES
        raise ScopeError(f"unknown scope(s): {' '.join(sorted(unknown))}; the scopes are {scope_text(valid)}")
    scopes = frozenset(Scope(name) for name in names)
    if for_agent and scopes & ADMIN_SCOPES:
        raise ScopeError("the admin scopes are never granted to an agent token")
    return scopes


def admin_allows(scopes: Iterable[Scope], *, write: bool) -> bool:
    """Whether these scopes open an admin API route: a write needs admin:write (or the older
    `admin`); a read needs any admin scope, since write implies read."""
    held = frozenset(scopes)
    return bool(held & (_WRITERS if write else ADMIN_SCOPES))


def scope_text(scopes: Iterable[Scope | str]) -> str:
    """Scopes as OAuth writes them: space-separated, in a stable order."""
    return " ".join(sorted({str(scope) for scope in scopes}))


def scopes_needed(tool_names: Iterable[str]) -> frozenset[Scope]:
    """Every scope calls of these tools need; a tool that does not exist needs none."""
    needed: set[Scope] = set()
    for name in tool_names:
        needed |= TOOL_SCOPES.get(name, frozenset())
    return frozenset(needed)
