"""A policy change request in words, for the people who decide it: each part as asked, and while it
waits, what it is now and what it becomes. The request's page, the inbox and Slack say it this way.
Rules that bound more than this agent (its team's, its member's, the organisation's) say so, since
changing them gives room to every agent they bound."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from server.kit.money import format_usd
from server.kit.networks import network_name
from server.policy.model import Policy
from server.policy.requested_changes import ChangeRequestError, RequestedChange, parse_requested_change
from server.policy.rules import Rule
from server.vocabulary import RuleScope

SCOPE_WORDS = {
    RuleScope.AGENT: "this agent's rule",
    RuleScope.TEAM: "a rule of the agent's team: it bounds every agent of the team",
    RuleScope.MEMBER: "a rule of the agent's person: it bounds every agent of that member",
    RuleScope.ORG: "a rule of the whole organisation: it bounds every agent",
}


@dataclass(frozen=True)
class Line:
    """One part of a change: what it is about, what was asked, and (while it waits) the setting
    now and after approval."""

    what: str
    asked: str
    now: str | None = None
    after: str | None = None


def _usd(value: Decimal | int | None, *, atomic: bool = False, none: str = "no limit") -> str:
    return none if value is None else f"{format_usd(value, atomic=atomic)} USD"


def _listed(items: Sequence[str], *, none: str = "none") -> str:
    return ", ".join(items) if items else none


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _rule_what(rule_id: str, rule: Rule | None) -> str:
    if rule is None:
        return f"Rule {rule_id} (no longer in force)"
    condition = "".join(
        [
            f", for host {rule.host}" if rule.host else "",
            f", for paths from {rule.path_prefix}" if rule.path_prefix else "",
        ]
    )
    window = f" per {rule.window}" if rule.window else ""
    return f"Rule {rule_id}: {rule.kind}{window}{condition} ({SCOPE_WORDS[rule.scope]})"


def _policy_parts(
    change: RequestedChange, window: str
) -> list[tuple[bool, str, str, Callable[[Policy], str]]]:
    """Each policy part the change may have: whether it has it, what it is about, what was asked,
    and how a policy shows that setting (now, and after approval)."""
    threshold = "no threshold" if change.remove_step_up_threshold else _usd(change.step_up_threshold_usd)
    return [
        (
            bool(change.add_allow_hosts),
            "Allowed hosts",
            "add " + _listed(change.add_allow_hosts),
            lambda policy: _listed(policy.allow_hosts),
        ),
        (
            bool(change.remove_deny_hosts),
            "Denied hosts",
            "stop denying " + _listed(change.remove_deny_hosts),
            lambda policy: _listed(policy.deny_hosts),
        ),
        (
            bool(change.add_networks),
            "Networks",
            "add " + _listed([network_name(item) for item in change.add_networks]),
            lambda policy: _listed([network_name(item) for item in policy.networks]),
        ),
        (
            bool(change.remove_pay_to_deny),
            "Denied payees",
            "stop denying " + _listed(change.remove_pay_to_deny),
            lambda policy: _listed(policy.pay_to_deny),
        ),
        (
            change.max_usd_per_tx is not None,
            "Most per payment",
            _usd(change.max_usd_per_tx),
            lambda policy: _usd(policy.max_usd_per_tx),
        ),
        (
            change.daily_cap_usd is not None,
            "Most per day (UTC)",
            _usd(change.daily_cap_usd),
            lambda policy: _usd(policy.daily_cap_usd),
        ),
        (
            change.step_up_threshold_usd is not None or change.remove_step_up_threshold,
            "A person approves payments from",
            threshold,
            lambda policy: _usd(policy.step_up_threshold_usd, none="no threshold"),
        ),
        (
            change.velocity_max_tx is not None,
            f"Most payments per {window}",
            str(change.velocity_max_tx),
            lambda policy: "no limit" if policy.velocity.max_tx is None else str(policy.velocity.max_tx),
        ),
        (
            change.velocity_max_usd is not None,
            f"Most USD per {window}",
            _usd(change.velocity_max_usd),
            lambda policy: _usd(policy.velocity.max_usd),
        ),
        (
            change.allow_catalog_hosts,
            "Sellers listed in the catalog count as allowed",
            "yes",
            lambda policy: _yes(policy.allow_catalog_hosts),
        ),
        (
            change.allow_unverified_sellers,
            "Only sellers the catalog verified",
            "no",
            lambda policy: _yes(policy.verified_sellers_only),
        ),
    ]


def lines_of(change: RequestedChange, policy: Policy | None, rules: Mapping[str, Rule]) -> list[Line]:
    """Each part of `change`, with the setting now and after approval when `policy` (the one in
    force) is given; without it (a request already decided), only what was asked."""
    if policy is None:
        parts = _policy_parts(change, "the velocity window")
        lines = [Line(what, asked) for asked_for, what, asked, _ in parts if asked_for]
        lines += [
            Line(f"Rule {rule_id}", "limit " + _usd(limit, atomic=True))
            for rule_id, limit in change.raise_rule_limits
        ]
        return lines + [Line(f"Rule {rule_id}", "remove it") for rule_id in change.remove_rules]
    after = change.policy_after(policy)
    parts = _policy_parts(change, f"{policy.velocity.window_seconds} seconds")
    lines = [
        Line(what, asked, show(policy), show(after)) for asked_for, what, asked, show in parts if asked_for
    ]
    for rule_id, limit in change.raise_rule_limits:
        rule = rules.get(rule_id)
        now = _usd(rule.limit_atomic, atomic=True) if rule else "not in force"
        lines.append(
            Line(
                _rule_what(rule_id, rule), "limit " + _usd(limit, atomic=True), now, _usd(limit, atomic=True)
            )
        )
    for rule_id in change.remove_rules:
        lines.append(Line(_rule_what(rule_id, rules.get(rule_id)), "remove it", "in force", "removed"))
    return lines


def asked_words(change: RequestedChange) -> str:
    """The whole change in one line, as asked (for a message with no room for a page)."""
    return "; ".join(f"{line.what}: {line.asked}" for line in lines_of(change, None, {}))


def document_words(document: object) -> str | None:
    """A stored change document (an audit event's) in one line, or None when it does not read as
    one."""
    try:
        return asked_words(parse_requested_change(document))
    except ChangeRequestError:
        return None
