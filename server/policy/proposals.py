"""Rules an agent proposes from the conversation (propose_rule): restrict-only, this agent only.

Pure validation of the tool's input. A proposal can only be a limit or a deny on the proposing
agent, never a hold (it would ask a human for nothing) and never anything that allows more; a deny
needs a host or path condition, so a chat rule can never switch an agent off by accident.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.kit.money import AmountError, parse_usd, usd_to_atomic
from server.policy.rules import RuleError, RuleReason, clean_terms
from server.vocabulary import RuleKind, RuleWindow

CHAT_KINDS = (RuleKind.LIMIT, RuleKind.DENY)
MAX_ACTIVE_CHAT_RULES = 10
MAX_PROPOSALS_PER_HOUR = 20
DEFAULT_EXPIRES_IN_HOURS = 30 * 24
MAX_EXPIRES_IN_HOURS = 90 * 24
FIELDS = ("kind", "limitUsd", "window", "host", "pathPrefix", "expiresInHours")
_INVALID = {
    "host": RuleReason.INVALID_HOST,
    "pathPrefix": RuleReason.INVALID_PATH_PREFIX,
    "window": RuleReason.INVALID_WINDOW,
}


@dataclass(frozen=True)
class Proposal:
    kind: RuleKind
    host: str | None
    path_prefix: str | None
    limit_atomic: int | None
    window: RuleWindow | None
    expires_in_hours: int


def _optional_text(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RuleError(_INVALID[name], (name,))
    return value.strip()


def parse_proposal(arguments: dict[str, Any]) -> Proposal:
    """Validate propose_rule's input, or raise RuleError naming the reason and the fields."""
    unknown = tuple(sorted(name for name in arguments if name not in FIELDS))
    if unknown:
        raise RuleError(RuleReason.UNKNOWN_FIELD, unknown)
    kind = arguments.get("kind")
    if kind not in CHAT_KINDS:
        raise RuleError(RuleReason.INVALID_KIND, ("kind",))
    host = _optional_text(arguments, "host")
    path_prefix = _optional_text(arguments, "pathPrefix")
    window = _optional_text(arguments, "window")

    limit_atomic: int | None = None
    raw_limit = arguments.get("limitUsd")
    if raw_limit is not None:
        try:
            limit_atomic = usd_to_atomic(parse_usd(raw_limit))
        except AmountError as exc:
            raise RuleError(RuleReason.INVALID_LIMIT, ("limitUsd",)) from exc

    expires = arguments.get("expiresInHours", DEFAULT_EXPIRES_IN_HOURS)
    if isinstance(expires, bool) or not isinstance(expires, int) or not 1 <= expires <= MAX_EXPIRES_IN_HOURS:
        raise RuleError(RuleReason.INVALID_EXPIRY, ("expiresInHours",))

    if kind == RuleKind.DENY and host is None and path_prefix is None:
        raise RuleError(RuleReason.DENY_NEEDS_CONDITION, ("host", "pathPrefix"))
    clean_kind, clean_host, clean_path, clean_limit, clean_window = clean_terms(
        kind=kind, host=host, path_prefix=path_prefix, limit_atomic=limit_atomic, window=window
    )
    return Proposal(clean_kind, clean_host, clean_path, clean_limit, clean_window, expires)
