"""More room an agent asks a person for (request_policy_change), as a value.

The tool's `change` object is read into a `RequestedChange`: hosts to allow, denied hosts or payees
to drop, networks to add, higher caps, thresholds and velocity limits, the catalog-hosts and
unverified-sellers switches, and rules of the agent (its own, its team's, its member's, its
organisation's) to raise or remove. Its `document()` is the one canonical form that is stored,
hashed and bound into a deciding member's passkey challenge; `policy_after` is what the agent's
policy becomes when a member approves it. Every part must give more room than the policy and
rules in force when it is asked (`not_wider`): a request is never a way to narrow, which
propose_rule does at once.

Pure: no tables, no database, no service.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from enum import StrEnum
from typing import Any

from server.kit.money import AmountError, format_usd, parse_usd, usd_to_atomic
from server.policy.hosts import HostPatternError, host_matches_any, normalize_pattern
from server.policy.model import Policy
from server.policy.rules import Rule
from server.vocabulary import SUPPORTED_NETWORKS, RuleKind

MAX_ITEMS = 10  # hosts, networks, payees or rules in one list
MAX_VELOCITY_TX = 1_000_000
MAX_RULE_ID = 40
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")

HOST_LISTS = ("addAllowHosts", "removeDenyHosts")
AMOUNTS = ("maxUsdPerTx", "dailyCapUsd", "stepUpThresholdUsd", "velocityMaxUsd")
SWITCHES = ("removeStepUpThreshold", "allowCatalogHosts", "allowUnverifiedSellers")
FIELDS = (
    *HOST_LISTS,
    "addNetworks",
    "removePayToDeny",
    *AMOUNTS,
    "velocityMaxTx",
    *SWITCHES,
    "raiseRuleLimits",
    "removeRules",
)


class ChangeReason(StrEnum):
    """Why a requested change was refused: the `reason` of policy_change_rejected."""

    NOT_AN_OBJECT = "not_an_object"
    EMPTY_CHANGE = "empty_change"
    UNKNOWN_FIELD = "unknown_field"
    INVALID_HOST = "invalid_host"
    INVALID_NETWORK = "invalid_network"
    INVALID_PAY_TO = "invalid_pay_to"
    INVALID_AMOUNT = "invalid_amount"
    INVALID_COUNT = "invalid_count"
    INVALID_SWITCH = "invalid_switch"
    INVALID_LIST = "invalid_list"
    INVALID_RULE = "invalid_rule"
    CONFLICTING_FIELDS = "conflicting_fields"
    UNKNOWN_RULE = "unknown_rule"
    NOT_A_LIMIT_RULE = "not_a_limit_rule"
    NOT_WIDER = "not_wider"


class ChangeRequestError(ValueError):
    """A requested change that cannot be accepted: `reason` says why, `fields` names the parts."""

    def __init__(self, reason: ChangeReason, fields: Sequence[str]) -> None:
        super().__init__(f"{reason}: {', '.join(fields)}")
        self.reason = reason
        self.fields = tuple(fields)


@dataclass(frozen=True)
class RequestedChange:
    """What an agent asked for; a field left at its default is not part of the request."""

    add_allow_hosts: tuple[str, ...] = ()
    remove_deny_hosts: tuple[str, ...] = ()
    add_networks: tuple[str, ...] = ()
    remove_pay_to_deny: tuple[str, ...] = ()
    max_usd_per_tx: Decimal | None = None
    daily_cap_usd: Decimal | None = None
    step_up_threshold_usd: Decimal | None = None
    remove_step_up_threshold: bool = False
    velocity_max_tx: int | None = None
    velocity_max_usd: Decimal | None = None
    allow_catalog_hosts: bool = False
    allow_unverified_sellers: bool = False
    raise_rule_limits: tuple[tuple[str, int], ...] = ()  # (rule id, new limit in atomic units)
    remove_rules: tuple[str, ...] = ()

    @property
    def touches_policy(self) -> bool:
        """Whether approving it writes a policy version (rather than only rule versions)."""
        return any(name not in ("raiseRuleLimits", "removeRules") for name in self.document())

    @property
    def rule_ids(self) -> tuple[str, ...]:
        """Every rule the request names, in order, each once."""
        return tuple(dict.fromkeys([*(rule_id for rule_id, _ in self.raise_rule_limits), *self.remove_rules]))

    def document(self) -> dict[str, Any]:
        """The canonical form: only the parts asked for, lists sorted, USD as text."""
        doc: dict[str, Any] = {
            "addAllowHosts": sorted(self.add_allow_hosts),
            "removeDenyHosts": sorted(self.remove_deny_hosts),
            "addNetworks": sorted(self.add_networks),
            "removePayToDeny": sorted(self.remove_pay_to_deny),
            "maxUsdPerTx": _usd(self.max_usd_per_tx),
            "dailyCapUsd": _usd(self.daily_cap_usd),
            "stepUpThresholdUsd": _usd(self.step_up_threshold_usd),
            "removeStepUpThreshold": self.remove_step_up_threshold or None,
            "velocityMaxTx": self.velocity_max_tx,
            "velocityMaxUsd": _usd(self.velocity_max_usd),
            "allowCatalogHosts": self.allow_catalog_hosts or None,
            "allowUnverifiedSellers": self.allow_unverified_sellers or None,
            "raiseRuleLimits": [
                {"ruleId": rule_id, "limitUsd": format_usd(limit, atomic=True)}
                for rule_id, limit in sorted(self.raise_rule_limits)
            ],
            "removeRules": sorted(self.remove_rules),
        }
        return {name: value for name, value in doc.items() if value not in (None, [])}

    def policy_after(self, policy: Policy) -> Policy:
        """`policy` with this change made (the version is the caller's to set)."""
        removed_payees = {payee.lower() for payee in self.remove_pay_to_deny}
        threshold = policy.step_up_threshold_usd
        if self.remove_step_up_threshold:
            threshold = None
        elif self.step_up_threshold_usd is not None:
            threshold = self.step_up_threshold_usd
        velocity = policy.velocity
        if self.velocity_max_tx is not None:
            velocity = replace(velocity, max_tx=self.velocity_max_tx)
        if self.velocity_max_usd is not None:
            velocity = replace(velocity, max_usd=self.velocity_max_usd)
        return policy.with_changes(
            allow_hosts=(*policy.allow_hosts, *_new(self.add_allow_hosts, policy.allow_hosts)),
            deny_hosts=tuple(host for host in policy.deny_hosts if host not in self.remove_deny_hosts),
            networks=(*policy.networks, *_new(self.add_networks, policy.networks)),
            pay_to_deny=tuple(payee for payee in policy.pay_to_deny if payee.lower() not in removed_payees),
            max_usd_per_tx=policy.max_usd_per_tx if self.max_usd_per_tx is None else self.max_usd_per_tx,
            daily_cap_usd=policy.daily_cap_usd if self.daily_cap_usd is None else self.daily_cap_usd,
            step_up_threshold_usd=threshold,
            velocity=velocity,
            allow_catalog_hosts=policy.allow_catalog_hosts or self.allow_catalog_hosts,
            verified_sellers_only=policy.verified_sellers_only and not self.allow_unverified_sellers,
        )

    def check_wider(self, policy: Policy, rules: Mapping[str, Rule]) -> None:
        """Raise ChangeRequestError unless every part gives more room than `policy` and `rules`
        (the rules in force that apply to the agent, by id) do now."""
        for rule_id in self.rule_ids:
            if rule_id not in rules:
                raise ChangeRequestError(ChangeReason.UNKNOWN_RULE, [_rule_field(self, rule_id)])
        for rule_id, _ in self.raise_rule_limits:
            if rules[rule_id].kind != RuleKind.LIMIT:
                raise ChangeRequestError(ChangeReason.NOT_A_LIMIT_RULE, ["raiseRuleLimits"])
        narrower = [name for name, wider in self._parts(policy, rules) if not wider]
        if narrower:
            raise ChangeRequestError(ChangeReason.NOT_WIDER, narrower)

    def _parts(self, policy: Policy, rules: Mapping[str, Rule]) -> list[tuple[str, bool]]:
        """Each part asked for, and whether it gives more room than now."""
        threshold, velocity = policy.step_up_threshold_usd, policy.velocity
        denied_payees = {payee.lower() for payee in policy.pay_to_deny}
        parts = [
            (
                "addAllowHosts",
                self.add_allow_hosts,
                not any(host_matches_any(policy.allow_hosts, host) for host in self.add_allow_hosts),
            ),
            (
                "removeDenyHosts",
                self.remove_deny_hosts,
                set(self.remove_deny_hosts) <= set(policy.deny_hosts),
            ),
            ("addNetworks", self.add_networks, not set(self.add_networks) & set(policy.networks)),
            (
                "removePayToDeny",
                self.remove_pay_to_deny,
                {payee.lower() for payee in self.remove_pay_to_deny} <= denied_payees,
            ),
            ("maxUsdPerTx", self.max_usd_per_tx, _raises(policy.max_usd_per_tx, self.max_usd_per_tx)),
            ("dailyCapUsd", self.daily_cap_usd, _raises(policy.daily_cap_usd, self.daily_cap_usd)),
            (
                "stepUpThresholdUsd",
                self.step_up_threshold_usd,
                _raises(threshold, self.step_up_threshold_usd),
            ),
            ("removeStepUpThreshold", self.remove_step_up_threshold, threshold is not None),
            ("velocityMaxTx", self.velocity_max_tx, _raises(velocity.max_tx, self.velocity_max_tx)),
            ("velocityMaxUsd", self.velocity_max_usd, _raises(velocity.max_usd, self.velocity_max_usd)),
            ("allowCatalogHosts", self.allow_catalog_hosts, not policy.allow_catalog_hosts),
            ("allowUnverifiedSellers", self.allow_unverified_sellers, policy.verified_sellers_only),
            (
                "raiseRuleLimits",
                self.raise_rule_limits,
                all(_raises(rules[rule_id].limit_atomic, limit) for rule_id, limit in self.raise_rule_limits),
            ),
            ("removeRules", self.remove_rules, True),
        ]
        return [(name, wider) for name, asked, wider in parts if asked not in (None, False, ())]


def _usd(value: Decimal | None) -> str | None:
    return None if value is None else format_usd(value)


def _new(asked: tuple[str, ...], present: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(item for item in asked if item not in present)


def _raises(current: Decimal | int | None, asked: Decimal | int | None) -> bool:
    """A higher limit than the one in force; there is nothing to raise where there is no limit."""
    return current is not None and asked is not None and asked > current


def _rule_field(change: RequestedChange, rule_id: str) -> str:
    return "raiseRuleLimits" if rule_id in dict(change.raise_rule_limits) else "removeRules"


def parse_requested_change(value: object) -> RequestedChange:
    """Read the tool's `change` object, or raise ChangeRequestError naming the reason and fields."""
    if not isinstance(value, dict):
        raise ChangeRequestError(ChangeReason.NOT_AN_OBJECT, ["change"])
    unknown = sorted(str(name) for name in value if name not in FIELDS)
    if unknown:
        raise ChangeRequestError(ChangeReason.UNKNOWN_FIELD, unknown)
    given = {name: item for name, item in value.items() if item is not None}
    if not given:
        raise ChangeRequestError(ChangeReason.EMPTY_CHANGE, ["change"])
    for name in SWITCHES:
        if name in given and given[name] is not True:
            raise ChangeRequestError(ChangeReason.INVALID_SWITCH, [name])
    if "stepUpThresholdUsd" in given and "removeStepUpThreshold" in given:
        raise ChangeRequestError(
            ChangeReason.CONFLICTING_FIELDS, ["stepUpThresholdUsd", "removeStepUpThreshold"]
        )
    raised = _rule_limits(given.get("raiseRuleLimits"))
    removed = tuple(_rule_id(item, "removeRules") for item in _items(given, "removeRules"))
    if len(set(removed)) != len(removed) or {rule_id for rule_id, _ in raised} & set(removed):
        raise ChangeRequestError(ChangeReason.CONFLICTING_FIELDS, ["raiseRuleLimits", "removeRules"])
    return RequestedChange(
        add_allow_hosts=_hosts(given, "addAllowHosts"),
        remove_deny_hosts=_hosts(given, "removeDenyHosts"),
        add_networks=_networks(given),
        remove_pay_to_deny=_payees(given),
        max_usd_per_tx=_amount(given, "maxUsdPerTx"),
        daily_cap_usd=_amount(given, "dailyCapUsd"),
        step_up_threshold_usd=_amount(given, "stepUpThresholdUsd"),
        remove_step_up_threshold="removeStepUpThreshold" in given,
        velocity_max_tx=_count(given),
        velocity_max_usd=_amount(given, "velocityMaxUsd"),
        allow_catalog_hosts="allowCatalogHosts" in given,
        allow_unverified_sellers="allowUnverifiedSellers" in given,
        raise_rule_limits=raised,
        remove_rules=removed,
    )


def _items(given: dict[str, Any], name: str) -> list[Any]:
    """A list of 1 to MAX_ITEMS entries (an absent list is empty)."""
    items = given.get(name, [])
    if not isinstance(items, list) or (name in given and not 1 <= len(items) <= MAX_ITEMS):
        raise ChangeRequestError(ChangeReason.INVALID_LIST, [name])
    return items


def _unique(items: list[str], name: str) -> tuple[str, ...]:
    if len(set(items)) != len(items):
        raise ChangeRequestError(ChangeReason.INVALID_LIST, [name])
    return tuple(items)


def _hosts(given: dict[str, Any], name: str) -> tuple[str, ...]:
    hosts = []
    for item in _items(given, name):
        try:
            hosts.append(normalize_pattern(item) if isinstance(item, str) and len(item) <= 255 else "")
        except HostPatternError:
            hosts.append("")
        if not hosts[-1]:
            raise ChangeRequestError(ChangeReason.INVALID_HOST, [name])
    return _unique(hosts, name)


def _networks(given: dict[str, Any]) -> tuple[str, ...]:
    networks = _items(given, "addNetworks")
    if any(item not in SUPPORTED_NETWORKS for item in networks):
        raise ChangeRequestError(ChangeReason.INVALID_NETWORK, ["addNetworks"])
    return _unique([str(item) for item in networks], "addNetworks")


def _payees(given: dict[str, Any]) -> tuple[str, ...]:
    payees = _items(given, "removePayToDeny")
    if any(not isinstance(item, str) or not _ADDRESS.fullmatch(item) for item in payees):
        raise ChangeRequestError(ChangeReason.INVALID_PAY_TO, ["removePayToDeny"])
    return _unique([str(item).lower() for item in payees], "removePayToDeny")


def _amount(given: dict[str, Any], name: str) -> Decimal | None:
    if name not in given:
        return None
    try:
        amount = parse_usd(given[name])
        usd_to_atomic(amount)
    except AmountError as exc:
        raise ChangeRequestError(ChangeReason.INVALID_AMOUNT, [name]) from exc
    return amount


def _count(given: dict[str, Any]) -> int | None:
    count = given.get("velocityMaxTx")
    if count is None:
        return None
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_VELOCITY_TX:
        raise ChangeRequestError(ChangeReason.INVALID_COUNT, ["velocityMaxTx"])
    return count


def _rule_id(value: object, name: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_RULE_ID or not value.isprintable():
        raise ChangeRequestError(ChangeReason.INVALID_RULE, [name])
    return value


def _rule_limits(value: object) -> tuple[tuple[str, int], ...]:
    items = _items({"raiseRuleLimits": value} if value is not None else {}, "raiseRuleLimits")
    limits: dict[str, int] = {}
    for item in items:
        if not isinstance(item, dict) or set(item) != {"ruleId", "limitUsd"}:
            raise ChangeRequestError(ChangeReason.INVALID_RULE, ["raiseRuleLimits"])
        rule_id = _rule_id(item["ruleId"], "raiseRuleLimits")
        try:
            limit = usd_to_atomic(parse_usd(item["limitUsd"]))
        except AmountError as exc:
            raise ChangeRequestError(ChangeReason.INVALID_AMOUNT, ["raiseRuleLimits"]) from exc
        if rule_id in limits:
            raise ChangeRequestError(ChangeReason.CONFLICTING_FIELDS, ["raiseRuleLimits"])
        limits[rule_id] = limit
    return tuple(limits.items())
