"""The policy engine: pure functions from (policy, rules, usage, payment, context) to a decision.

No I/O: the ledger counts usage (per window and per rule, in the rule's scope) and looks up the
catalog and the organisation's payees before calling, inside the transaction that then records the
decision. A payment is allowed only when every rule passes; a denial lists every rule that failed,
in the order a payment meets them. Holds for a human are considered only after every rule passed;
a hold lists every reason that applies (`hold_reasons`, in HOLD_ORDER) and names the first
(`hold_reason`), so an approval can cover exactly the reasons a person saw.

`judge_location` is the part of the policy that depends only on where a request goes (host and
path): it runs before each request to a seller, redirects included, so nothing is sent where the
policy could never pay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Literal

from server.kit.money import usd_to_atomic
from server.policy.hosts import host_matches_any
from server.policy.model import Policy
from server.policy.rules import Rule
from server.vocabulary import DenyReason, HoldReason, RuleKind, RuleScope

Outcome = Literal["allow", "deny", "hold"]

# Every denial reason, in the order a payment meets them (a denial lists them in this order).
REASON_ORDER: tuple[DenyReason, ...] = tuple(DenyReason)
HOLD_ORDER: tuple[HoldReason, ...] = tuple(HoldReason)


@dataclass(frozen=True)
class Payment:
    """What the seller asked for, as far as the policy cares."""

    host: str
    path: str
    network: str
    asset: str | None  # "USDC" when the asset is the configured USDC of the network
    pay_to: str
    amount_atomic: int | None  # None when the challenge's amount could not be read
    resource_host: str | None = None  # host of the resource the challenge names
    instruction_like_description: bool = False  # the 402's text reads like orders to an agent
    # Paths requested on the way to the one that asked for payment (same-origin redirects, the
    # agent's own URL first): deny and hold rules that select any of them apply to the payment.
    via_paths: tuple[str, ...] = ()

    @property
    def paths(self) -> tuple[str, ...]:
        return (*self.via_paths, self.path)


@dataclass(frozen=True)
class Usage:
    """What was already spent, counted by the ledger at decision time."""

    spent_today_atomic: int = 0  # the agent, this UTC day
    window_tx_count: int = 0  # the agent, in the velocity window
    window_spent_atomic: int = 0
    # Per limit rule: spend in the rule's scope and window that its conditions select.
    rule_spent_atomic: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class CatalogListing:
    """The catalog's entry for the payment's host; `pinned_pay_to` is empty for rotating payees."""

    pinned_pay_to: frozenset[str] = frozenset()  # lower-case addresses

    def pins(self, pay_to: str) -> bool:
        return pay_to.lower() in self.pinned_pay_to


@dataclass(frozen=True)
class Context:
    """Facts about the payment beyond the agent's own usage."""

    catalog: CatalogListing | None = None  # None: the host is not listed
    pay_to_known: bool = False  # the organisation has paid this payee before
    has_member: bool = False  # the agent belongs to a member, so the member's sub-cap applies


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reasons: tuple[DenyReason, ...]
    policy_version: int
    hold_reason: HoldReason | None = None  # the first of hold_reasons
    hold_reasons: tuple[HoldReason, ...] = ()  # every hold that applies, in HOLD_ORDER
    threshold_usd: Decimal | None = None  # when `threshold` is among the hold reasons
    rules: tuple[str, ...] = ()  # the rules behind rule_denied, rule_limit_exceeded or a `rule` hold
    rule_scopes: Mapping[str, RuleScope] = field(default_factory=dict)  # of those rules
    rule_versions: Mapping[str, int] = field(default_factory=dict)  # of every rule considered

    @property
    def allowed(self) -> bool:
        return self.outcome == "allow"

    @property
    def versions(self) -> dict[str, Any]:
        return {"policy": self.policy_version, "rules": dict(self.rule_versions)}


# At most this many (host, paths) selections are remembered per rule set; then it starts afresh.
_SELECTIONS_KEPT = 256


@dataclass(frozen=True)
class _Selection:
    """Which rules select one payment location: the limits that count it, and the deny and hold
    rules that stop or hold it (any of its paths, redirects included)."""

    limiting: tuple[tuple[str, int, Rule], ...]  # (id, limit, rule) of each limit rule
    denying: tuple[Rule, ...]
    holding: tuple[Rule, ...]


class RuleSet:
    """A set of rules compiled once: sorted by kind, versions kept, and the rules that select a
    location remembered, so a decision with many rules looks only at those its payment meets.

    Immutable to its users: `select` depends only on the rules and its arguments (what it remembers
    is the same answer computed again), so the engine stays pure. Build one per policy version and
    rule versions, and pass it wherever a sequence of rules is taken.
    """

    __slots__ = ("_deny", "_hold", "_limits", "_selections", "member_caps", "rules", "versions")

    def __init__(self, rules: Sequence[Rule]) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.versions: Mapping[str, int] = MappingProxyType({rule.id: rule.version for rule in self.rules})
        self._deny = tuple(rule for rule in self.rules if rule.kind == RuleKind.DENY)
        self._hold = tuple(rule for rule in self.rules if rule.kind == RuleKind.HOLD)
        self._limits = tuple(
            rule for rule in self.rules if rule.kind == RuleKind.LIMIT and not rule.is_member_cap
        )
        self.member_caps: tuple[Rule, ...] = tuple(rule for rule in self.rules if rule.is_member_cap)
        self._selections: dict[tuple[str, tuple[str, ...]], _Selection] = {}

    def __iter__(self) -> Any:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def select(self, host: str, paths: tuple[str, ...]) -> _Selection:
        """The rules that select a payment to `host` whose last path is `paths[-1]` (limits look at
        that one; deny and hold rules at any of them)."""
        key = (host, paths)
        found = self._selections.get(key)
        if found is None:
            path = paths[-1]
            found = _Selection(
                limiting=tuple(
                    (rule.id, rule.limit_atomic or 0, rule)
                    for rule in self._limits
                    if rule.matches(host, path)
                ),
                denying=tuple(rule for rule in self._deny if _selects(rule, host, paths)),
                holding=tuple(rule for rule in self._hold if _selects(rule, host, paths)),
            )
            if len(self._selections) >= _SELECTIONS_KEPT:
                self._selections.clear()
            self._selections[key] = found
        return found


def compile_rules(rules: Sequence[Rule] | RuleSet) -> RuleSet:
    """The rules as a RuleSet (itself, when it already is one)."""
    return rules if isinstance(rules, RuleSet) else RuleSet(rules)


@lru_cache(maxsize=1024)
def _atomic_of(usd: Decimal) -> int:
    return usd_to_atomic(usd)


@lru_cache(maxsize=1024)
def _lower_set(addresses: tuple[str, ...]) -> frozenset[str]:
    return frozenset(address.lower() for address in addresses)


def host_allowed(policy: Policy, host: str, *, listed: bool = False) -> bool:
    """Allowed hosts (or, with allowCatalogHosts, a host the catalog lists), deny hosts winning.

    An empty allow list allows nothing unless the catalog rule lets a listed seller in.
    """
    if host_matches_any(policy.deny_hosts, host):
        return False
    return host_matches_any(policy.allow_hosts, host) or (policy.allow_catalog_hosts and listed)


def via_catalog(policy: Policy, host: str, *, listed: bool) -> bool:
    """Allowed only because the catalog lists it: the first payment to such a host waits for a human."""
    return (
        policy.allow_catalog_hosts
        and listed
        and not host_matches_any(policy.allow_hosts, host)
        and not host_matches_any(policy.deny_hosts, host)
    )


def judge_location(
    policy: Policy, rules: Sequence[Rule] | RuleSet, *, host: str, path: str, listed: bool = False
) -> Decision:
    """Whether a request may go to `host` at `path` at all: every denial that depends only on where
    it goes (allowed and denied hosts, deny rules, challenge hosts and paths), in REASON_ORDER."""
    ruleset = compile_rules(rules)
    reasons: set[DenyReason] = set()
    if not host_allowed(policy, host, listed=listed):
        reasons.add(DenyReason.HOST_NOT_ALLOWED)
    denying = ruleset.select(host, (path,)).denying
    if denying:
        reasons.add(DenyReason.RULE_DENIED)
    challenge = policy.challenge
    if challenge.hosts and not host_matches_any(challenge.hosts, host):
        reasons.add(DenyReason.CHALLENGE_HOST_NOT_ALLOWED)
    if challenge.path_prefixes and not any(path.startswith(p) for p in challenge.path_prefixes):
        reasons.add(DenyReason.CHALLENGE_PATH_NOT_ALLOWED)
    if not reasons:
        return Decision("allow", (), policy.version, rule_versions=ruleset.versions)
    return Decision(
        "deny",
        tuple(code for code in REASON_ORDER if code in reasons),
        policy.version,
        rules=tuple(rule.id for rule in denying),
        rule_scopes={rule.id: rule.scope for rule in denying},
        rule_versions=ruleset.versions,
    )


@dataclass(frozen=True)
class _Findings:
    reasons: tuple[DenyReason, ...]
    rules: tuple[Rule, ...]


def _rule_findings(
    ruleset: RuleSet, usage: Usage, payment: Payment, context: Context
) -> tuple[list[DenyReason], list[Rule]]:
    reasons: list[DenyReason] = []
    named: list[Rule] = []
    # A deny rule stops a payment whose way to the challenge passed through what it denies.
    selection = ruleset.select(payment.host, payment.paths)
    amount = payment.amount_atomic
    if amount is not None and amount <= 0:
        amount = None

    member_caps = ruleset.member_caps
    if context.has_member and (
        not member_caps or (amount is not None and any(_exceeds(rule, usage, amount) for rule in member_caps))
    ):
        reasons.append(DenyReason.MEMBER_CAP_EXCEEDED)
    if selection.denying:
        reasons.append(DenyReason.RULE_DENIED)
        named += selection.denying
    if amount is not None:
        spent = usage.rule_spent_atomic.get
        limiting = [rule for rule_id, limit, rule in selection.limiting if spent(rule_id, 0) + amount > limit]
        if limiting:
            reasons.append(DenyReason.RULE_LIMIT_EXCEEDED)
            named += limiting
    return reasons, named


def _exceeds(rule: Rule, usage: Usage, amount: int) -> bool:
    assert rule.limit_atomic is not None
    return usage.rule_spent_atomic.get(rule.id, 0) + amount > rule.limit_atomic


def _selects(rule: Rule, host: str, paths: Sequence[str]) -> bool:
    return any(rule.matches(host, path) for path in paths)


def _findings(
    policy: Policy, ruleset: RuleSet, usage: Usage, payment: Payment, context: Context
) -> _Findings:
    reasons: set[DenyReason] = set()
    listed = context.catalog is not None
    if not host_allowed(policy, payment.host, listed=listed):
        reasons.add(DenyReason.HOST_NOT_ALLOWED)
    if payment.resource_host is not None and payment.resource_host != payment.host:
        reasons.add(DenyReason.RESOURCE_HOST_MISMATCH)
    if payment.network not in policy.networks:
        reasons.add(DenyReason.NETWORK_NOT_ALLOWED)
    if payment.asset is None or payment.asset not in policy.assets:
        reasons.add(DenyReason.ASSET_NOT_ALLOWED)
    if policy.pay_to_deny and payment.pay_to.lower() in _lower_set(policy.pay_to_deny):
        reasons.add(DenyReason.PAY_TO_DENIED)
    if policy.verified_sellers_only or via_catalog(policy, payment.host, listed=listed):
        if context.catalog is None:
            reasons.add(DenyReason.SELLER_NOT_VERIFIED)
        elif context.catalog.pinned_pay_to and not context.catalog.pins(payment.pay_to):
            reasons.add(DenyReason.PAY_TO_NOT_VERIFIED)

    challenge = policy.challenge
    if challenge.hosts and not host_matches_any(challenge.hosts, payment.host):
        reasons.add(DenyReason.CHALLENGE_HOST_NOT_ALLOWED)
    if challenge.path_prefixes and not all(
        any(path.startswith(p) for p in challenge.path_prefixes) for path in payment.paths
    ):
        reasons.add(DenyReason.CHALLENGE_PATH_NOT_ALLOWED)

    rule_reasons, named = _rule_findings(ruleset, usage, payment, context)
    reasons.update(rule_reasons)

    amount = payment.amount_atomic
    if amount is None or amount <= 0:
        reasons.add(DenyReason.INVALID_AMOUNT)
    else:
        if amount > _atomic(policy.max_usd_per_tx):
            reasons.add(DenyReason.AMOUNT_EXCEEDS_PER_TRANSACTION)
        if usage.spent_today_atomic + amount > _atomic(policy.daily_cap_usd):
            reasons.add(DenyReason.DAILY_CAP_EXCEEDED)
        velocity = policy.velocity
        if velocity.max_tx is not None and usage.window_tx_count + 1 > velocity.max_tx:
            reasons.add(DenyReason.VELOCITY_TX_EXCEEDED)
        if velocity.max_usd is not None and usage.window_spent_atomic + amount > _atomic(velocity.max_usd):
            reasons.add(DenyReason.VELOCITY_USD_EXCEEDED)
        if challenge.max_usd is not None and amount > _atomic(challenge.max_usd):
            reasons.add(DenyReason.CHALLENGE_AMOUNT_EXCEEDED)
    if not reasons:
        return _Findings((), tuple(named))
    return _Findings(tuple(code for code in REASON_ORDER if code in reasons), tuple(named))


def _atomic(usd: Decimal) -> int:
    return _atomic_of(usd)


def hold_reasons(
    policy: Policy, rules: Sequence[Rule] | RuleSet, payment: Payment, context: Context
) -> tuple[tuple[HoldReason, ...], tuple[Rule, ...]]:
    """Every hold that applies to a payment that passed every rule, in HOLD_ORDER, and the hold
    rules behind a `rule` hold."""
    reasons: list[HoldReason] = []
    holding = compile_rules(rules).select(payment.host, payment.paths).holding
    if holding:
        reasons.append(HoldReason.RULE)
    if via_catalog(policy, payment.host, listed=context.catalog is not None):
        reasons.append(HoldReason.CATALOG_NEW_HOST)
    pinned = context.catalog is not None and context.catalog.pins(payment.pay_to)
    if not context.pay_to_known and not pinned:
        reasons.append(HoldReason.NEW_PAY_TO)
    if payment.instruction_like_description:
        reasons.append(HoldReason.INSTRUCTION_LIKE_DESCRIPTION)
    threshold = policy.step_up_threshold_usd
    amount = payment.amount_atomic
    if threshold is not None and amount is not None and amount >= _atomic(threshold):
        reasons.append(HoldReason.THRESHOLD)
    return tuple(reasons), holding


def hold_reason(
    policy: Policy, rules: Sequence[Rule] | RuleSet, payment: Payment, context: Context
) -> tuple[HoldReason | None, tuple[Rule, ...]]:
    """The first hold that applies to a payment that passed every rule, and the rules behind it."""
    reasons, holding = hold_reasons(policy, rules, payment, context)
    return (reasons[0] if reasons else None), holding


_NO_CONTEXT = Context()


def evaluate(
    policy: Policy,
    rules: Sequence[Rule] | RuleSet,
    usage: Usage,
    payment: Payment,
    context: Context | None = None,
) -> Decision:
    """The decision on one payment. `rules` may be a RuleSet compiled once (compile_rules) for
    every decision under the same rule versions: then a decision looks only at the rules its
    payment meets."""
    context = context or _NO_CONTEXT
    ruleset = compile_rules(rules)
    versions = ruleset.versions
    findings = _findings(policy, ruleset, usage, payment, context)
    if findings.reasons:
        return Decision(
            "deny",
            findings.reasons,
            policy.version,
            rules=tuple(rule.id for rule in findings.rules),
            rule_scopes={rule.id: rule.scope for rule in findings.rules},
            rule_versions=versions,
        )
    reasons, holding = hold_reasons(policy, ruleset, payment, context)
    if reasons:
        return Decision(
            "hold",
            (),
            policy.version,
            hold_reason=reasons[0],
            hold_reasons=reasons,
            threshold_usd=policy.step_up_threshold_usd if HoldReason.THRESHOLD in reasons else None,
            rules=tuple(rule.id for rule in holding),
            rule_scopes={rule.id: rule.scope for rule in holding},
            rule_versions=versions,
        )
    return Decision("allow", (), policy.version, rule_versions=versions)
