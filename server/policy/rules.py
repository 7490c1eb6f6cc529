"""Spending rules beyond an agent's own policy: limit, deny and hold rules, each scoped to an
agent, a team, a member (the sum over that person's agents) or the whole organisation, with an
optional host and path condition. Pure values; storage and versions live in rulebook.

Rules only ever restrict: a payment must pass every rule that applies to it, so adding a rule can
never widen what an agent may pay.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from server.kit.errors import InvalidInput
from server.policy.hosts import HostPatternError, host_matches, normalize_pattern
from server.policy.windows import WINDOWS
from server.sellers.urls import canonical_path_prefix
from server.vocabulary import RuleKind, RuleScope, RuleSource
from server.vocabulary import RuleWindow as Window

SCOPES: tuple[RuleScope, ...] = tuple(RuleScope)
KINDS: tuple[RuleKind, ...] = tuple(RuleKind)

MAX_PATH_PREFIX = 512
# New agents get a weekly limit of this many times their daily cap (it does not follow later
# changes of the daily cap: it is an ordinary rule from then on).
WEEKLY_DEFAULT_FACTOR = 5


class RuleReason(StrEnum):
    """Why a rule was refused: the `reason` of rule_rejected."""

    UNKNOWN_FIELD = "unknown_field"
    INVALID_SCOPE = "invalid_scope"
    INVALID_KIND = "invalid_kind"
    INVALID_HOST = "invalid_host"
    INVALID_PATH_PREFIX = "invalid_path_prefix"
    INVALID_LIMIT = "invalid_limit"
    INVALID_WINDOW = "invalid_window"
    INVALID_EXPIRY = "invalid_expiry"
    DENY_NEEDS_CONDITION = "deny_needs_condition"
    LIMIT_ON_NON_LIMIT_RULE = "limit_on_non_limit_rule"


class RuleError(ValueError):
    """A rule that cannot be accepted: `reason` says why, `fields` names the inputs at fault."""

    def __init__(self, reason: RuleReason, fields: tuple[str, ...]) -> None:
        super().__init__(f"{reason}: {', '.join(fields)}")
        self.reason = reason
        self.fields = fields


@dataclass(frozen=True)
class RuleTarget:
    """What a rule is for: the agent, team, member or organisation `scope_id`, in `org_id`.

    Built from a row the caller already read within its principal's reach (see
    tenancy.service.rule_target), so a rule can only be written for what the caller may see.
    """

    scope: RuleScope
    scope_id: str
    org_id: str


@dataclass(frozen=True)
class Rule:
    id: str
    version: int
    scope: RuleScope
    kind: RuleKind
    host: str | None = None  # a host pattern: exact or *.domain
    path_prefix: str | None = None
    limit_atomic: int | None = None  # limit rules only
    window: Window | None = None  # limit rules only
    source: RuleSource = RuleSource.ADMIN
    expires_at: datetime | None = None

    @property
    def conditional(self) -> bool:
        return self.host is not None or self.path_prefix is not None

    def matches(self, host: str, path: str) -> bool:
        """Whether the rule's conditions select a payment to `host` at `path`."""
        if self.host is not None and not host_matches(self.host, host):
            return False
        return self.path_prefix is None or path.startswith(self.path_prefix)

    @property
    def is_member_cap(self) -> bool:
        """A member's daily sub-cap: an unconditional daily limit on the sum of their agents."""
        unconditional_limit = self.kind == RuleKind.LIMIT and not self.conditional
        return self.scope == RuleScope.MEMBER and self.window == Window.DAY and unconditional_limit

    def same_terms(self, other: Rule) -> bool:
        """Identical but for id, version and expiry."""
        return (self.scope, self.kind, self.host, self.path_prefix, self.limit_atomic, self.window) == (
            other.scope,
            other.kind,
            other.host,
            other.path_prefix,
            other.limit_atomic,
            other.window,
        )


def valid_path_prefix(prefix: str) -> bool:
    return (
        prefix.startswith("/")
        and len(prefix) <= MAX_PATH_PREFIX
        and prefix.isascii()
        and all(ch.isprintable() and not ch.isspace() for ch in prefix)
        and "?" not in prefix
        and "#" not in prefix
    )


def clean_path_prefix(prefix: str) -> str | None:
    """A path prefix in the form request paths are judged in (server/sellers/urls.py), so `/%7Ea`
    selects `/~a`; None when it has no such form (an ambiguous escape, a dot segment)."""
    if not valid_path_prefix(prefix):
        return None
    try:
        return canonical_path_prefix(prefix)
    except (InvalidInput, ValueError):  # an ambiguous escape or a dot segment: a prefix of nothing judged
        return None


def clean_terms(
    *,
    kind: str,
    host: str | None,
    path_prefix: str | None,
    limit_atomic: int | None,
    window: str | None,
) -> tuple[RuleKind, str | None, str | None, int | None, Window | None]:
    """Validate a rule's terms and return them normalised, or raise RuleError."""
    if kind not in KINDS:
        raise RuleError(RuleReason.INVALID_KIND, ("kind",))
    clean_host: str | None = None
    if host is not None:
        try:
            clean_host = normalize_pattern(host)
        except HostPatternError as exc:
            raise RuleError(RuleReason.INVALID_HOST, ("host",)) from exc
    if path_prefix is not None:
        path_prefix = clean_path_prefix(path_prefix)
        if path_prefix is None:
            raise RuleError(RuleReason.INVALID_PATH_PREFIX, ("pathPrefix",))
    if kind == RuleKind.LIMIT:
        if limit_atomic is None or limit_atomic < 0:
            raise RuleError(RuleReason.INVALID_LIMIT, ("limitUsd",))
        clean_window = window or Window.DAY
        if clean_window not in WINDOWS:
            raise RuleError(RuleReason.INVALID_WINDOW, ("window",))
        return RuleKind.LIMIT, clean_host, path_prefix, limit_atomic, Window(clean_window)
    if limit_atomic is not None or window is not None:
        fields = tuple(
            name for name, value in (("limitUsd", limit_atomic), ("window", window)) if value is not None
        )
        raise RuleError(RuleReason.LIMIT_ON_NON_LIMIT_RULE, fields)
    return RuleKind(kind), clean_host, path_prefix, None, None
