"""propose_rule's result: the rule in force for the agent, and whether this call added it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from server.kit.clock import isoformat
from server.kit.money import format_usd
from server.policy.rules import Rule

ADDED = "The rule is in force for this agent only. Only a person can change or remove it."
ALREADY = "An identical rule is already in force for this agent, so nothing was added."


class ProposeRuleResult(BaseModel):
    ruleId: str
    added: bool
    kind: Literal["limit", "deny"]
    limitUsd: str | None
    window: Literal["day", "week", "month"] | None
    host: str | None
    pathPrefix: str | None
    expiresAt: str | None  # None only when the identical rule in force was set by a person
    message: str

    @classmethod
    def of(cls, rule: Rule, *, added: bool) -> ProposeRuleResult:
        """Validated on the way out: a chat rule, or the identical one in force, is a limit or a deny."""
        return cls.model_validate(
            {
                "ruleId": rule.id,
                "added": added,
                "kind": str(rule.kind),
                "limitUsd": None if rule.limit_atomic is None else format_usd(rule.limit_atomic, atomic=True),
                "window": None if rule.window is None else str(rule.window),
                "host": rule.host,
                "pathPrefix": rule.path_prefix,
                "expiresAt": isoformat(rule.expires_at) if rule.expires_at else None,
                "message": ADDED if added else ALREADY,
            }
        )
