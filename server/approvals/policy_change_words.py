"""A policy change request in words, for the people who decide it: each part as asked, and while it
waits, what it is now and what it becomes. The request's page, the inbox and Slack say it this way.
Rules that bound more than this agent (its team's, its member's, the organisation's) say so, since
changing them gives room to every agent they bound."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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


def _rule_what(rule_id: str, rule: Rule | None, *, waiting: bool) -> str:
    if rule is None:
        return f"Rule {rule_id} (no longer in force)" if waiting else f"Rule {rule_id}"
    condition = "".join(
        [
            f", for host {rule.host}" if rule.host else "",
            f", for paths from {rule.path_prefix}" if rule.path_prefix else "",
        ]
    )
    window = f" per {rule.window}" if rule.window else ""
    return f"Rule {rule_id}: {rule.kind}{window}{condition} ({SCOPE_WORDS[rule.scope]})"


def lines_of(change: RequestedChange, policy: Policy | None, rules: Mapping[str, Rule]) -> list[Line]:
    """Each part of `change`, with the setting now and after approval when `policy` (the one in
    force) is given; without it (a request already decided), only what was asked."""
    after = change.policy_after(policy) if policy is not None else None
    lines: list[Line] = []

    def add(what: str, asked: str, now: str | None, then: str | None) -> None:
        lines.append(Line(what, asked, now if policy else None, then if after else None))

    velocity_window = f"{policy.velocity.window_seconds} seconds" if policy else "the velocity window"
    if change.add_allow_hosts:
        add(
            "Allowed hosts",
            "add " + _listed(change.add_allow_hosts),
            _listed(policy.allow_hosts) if policy else None,
            _listed(after.allow_hosts) if after else None,
        )
    if change.remove_deny_hosts:
        add(
            "Denied hosts",
            "stop denying " + _listed(change.remove_deny_hosts),
            _listed(policy.deny_hosts) if policy else None,
            _listed(after.deny_hosts) if after else None,
        )
    if change.add_networks:
        add(
            "Networks",
            "add " + _listed([network_name(item) for item in change.add_networks]),
            _listed([network_name(item) for item in policy.networks]) if policy else None,
            _listed([network_name(item) for item in after.networks]) if after else None,
        )
    if change.remove_pay_to_deny:
        add(
            "Denied payees",
            "stop denying " + _listed(change.remove_pay_to_deny),
            _listed(policy.pay_to_deny) if policy else None,
            _listed(after.pay_to_deny) if after else None,
        )
    if change.max_usd_per_tx is not None:
        add(
            "Most per payment",
            _usd(change.max_usd_per_tx),
            _usd(policy.max_usd_per_tx) if policy else None,
            _usd(after.max_usd_per_tx) if after else None,
        )
    if change.daily_cap_usd is not None:
        add(
            "Most per day (UTC)",
            _usd(change.daily_cap_usd),
            _usd(policy.daily_cap_usd) if policy else None,
            _usd(after.daily_cap_usd) if after else None,
        )
    if change.step_up_threshold_usd is not None or change.remove_step_up_threshold:
        add(
            "A person approves payments from",
            "no threshold" if change.remove_step_up_threshold else _usd(change.step_up_threshold_usd),
            _usd(policy.step_up_threshold_usd, none="no threshold") if policy else None,
            _usd(after.step_up_threshold_usd, none="no threshold") if after else None,
        )
    if change.velocity_max_tx is not None:
        count = policy.velocity.max_tx if policy else None
        add(
            f"Most payments per {velocity_window}",
            str(change.velocity_max_tx),
            "no limit" if count is None else str(count),
            str(change.velocity_max_tx),
        )
    if change.velocity_max_usd is not None:
        add(
            f"Most USD per {velocity_window}",
            _usd(change.velocity_max_usd),
            _usd(policy.velocity.max_usd) if policy else None,
            _usd(change.velocity_max_usd),
        )
    if change.allow_catalog_hosts:
        add(
            "Sellers listed in the catalog count as allowed",
            "yes",
            _yes(policy.allow_catalog_hosts) if policy else None,
            "yes",
        )
    if change.allow_unverified_sellers:
        add(
            "Only sellers the catalog verified",
            "no",
            _yes(policy.verified_sellers_only) if policy else None,
            "no",
        )
    for rule_id, limit in change.raise_rule_limits:
        rule = rules.get(rule_id)
        add(
            _rule_what(rule_id, rule, waiting=policy is not None),
            "limit " + _usd(limit, atomic=True),
            _usd(rule.limit_atomic, atomic=True) if rule else "not in force",
            _usd(limit, atomic=True),
        )
    for rule_id in change.remove_rules:
        add(
            _rule_what(rule_id, rules.get(rule_id), waiting=policy is not None),
            "remove it",
            "in force",
            "removed",
        )
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
