"""Read and change agents' policies. A change never edits a row: it writes the next version.

A person's change arrives as `PolicySettings` (each setting as given, or left out); this module
turns it into the next policy, validated, so every entry point changes a policy the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from enum import Enum
from typing import Literal

from sqlmodel import Session

from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, PolicyVersion
from server.policy.model import (
    ChallengeRules,
    Policy,
    PolicyError,
    Velocity,
    host_patterns,
    usd_setting,
)
from server.policy.repository import PolicyVersionRepository
from server.policy.rules import clean_path_prefix
from server.settings import SUPPORTED_NETWORKS

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")


class _Keep(Enum):
    KEEP = "keep"


KEEP = _Keep.KEEP
STEP_UP_OFF = "off"
# The functions that write policy versions; a static test checks which MCP tools can reach them.
WRITERS = ("create_initial_policy", "set_policy", "update_policy", "add_catalog_host")


class PolicyNotFound(PaywardenError):
    code = "control_plane_unavailable"
    message = "The agent's policy could not be loaded, so nothing was requested."


class InvalidPolicy(PaywardenError):
    code = "invalid_policy"
    message = "The policy change was refused. See reason."


class SudoRequired(PaywardenError):
    code = "sudo_required"
    message = "This change widens what the agent may pay, which needs a passkey confirmation."

    def describe(self) -> str:
        widened = ", ".join(self.extra.get("widens", ()))
        return f"{self.message} It widens: {widened}. Make it from the dashboard or the command line."


@dataclass(frozen=True)
class PolicyChanges:
    """Fields to change; None (KEEP for the step-up threshold, which may be None) leaves a field
    as it is in the current version."""

    allow_hosts: tuple[str, ...] | None = None
    deny_hosts: tuple[str, ...] | None = None
    max_usd_per_tx: Decimal | None = None
    daily_cap_usd: Decimal | None = None
    step_up_threshold_usd: Decimal | Literal[_Keep.KEEP] | None = KEEP
    networks: tuple[str, ...] | None = None
    pay_to_deny: tuple[str, ...] | None = None
    velocity: Velocity | None = None
    challenge: ChallengeRules | None = None
    allow_catalog_hosts: bool | None = None
    verified_sellers_only: bool | None = None


@dataclass(frozen=True)
class PolicySettings:
    """A person's change to a policy, each setting as given: None, or an empty list, leaves it as
    it is, and a list replaces the whole list. Amounts are USD text; a step-up of "off" removes
    the threshold; velocity and challenge settings left out keep their current values."""

    allow_hosts: Sequence[str] = ()
    clear_allow_hosts: bool = False
    deny_hosts: Sequence[str] = ()
    clear_deny_hosts: bool = False
    max_usd_per_tx: str | None = None
    daily_cap_usd: str | None = None
    step_up_threshold_usd: str | None = None
    networks: Sequence[str] = ()
    pay_to_deny: Sequence[str] = ()
    clear_pay_to_deny: bool = False
    velocity_max_tx: int | None = None
    velocity_max_usd: str | None = None
    velocity_window_seconds: int | None = None
    challenge_hosts: Sequence[str] = ()
    challenge_path_prefixes: Sequence[str] = ()
    challenge_max_usd: str | None = None
    allow_catalog_hosts: bool | None = None
    verified_sellers_only: bool | None = None


def initial_policy(network: str) -> Policy:
    return Policy(version=1, networks=(network,))


def create_initial_policy(session: Session, *, agent: Agent, actor: str, now: datetime) -> Policy:
    policy = initial_policy(agent.network)
    _store(session, agent=agent, policy=policy, actor=actor, now=now)
    return policy


# Policies by the id of their version. A version is never changed once written (a change writes the
# next one), so a process parses each version once and keeps it; which version is in force is read
# from the database on every call, never from here.
_POLICIES: dict[tuple[str, str], Policy] = {}  # by (organisation, version id)
_POLICIES_KEPT = 4096


def _kept(row: PolicyVersion) -> Policy:
    policy = _POLICIES.get((row.org_id, row.id))
    if policy is None:
        policy = Policy.from_document(row.version, row.document)
        if len(_POLICIES) >= _POLICIES_KEPT:
            _POLICIES.clear()
        _POLICIES[(row.org_id, row.id)] = policy
    return policy


def current_policy(session: Session, agent: Agent) -> Policy:
    """The agent's policy in force: its newest version's id is read now, its document once per
    process."""
    versions = PolicyVersionRepository(session)
    newest = versions.newest_id_for_agent(org_id=agent.org_id, agent_id=agent.id)
    return policy_of_version(session, newest, org_id=agent.org_id)


def policy_of_version(session: Session, version_id: str | None, *, org_id: str) -> Policy:
    """The policy of the version with this id (the one in force, read by the caller in the same
    transaction); None, for an agent without a policy, fails closed. Read once per process."""
    if version_id is None:
        raise PolicyNotFound()
    policy = _POLICIES.get((org_id, version_id))
    if policy is not None:
        return policy
    row = PolicyVersionRepository(session).by_id(org_id=org_id, version_id=version_id)
    if row is None:
        raise PolicyNotFound()
    return _kept(row)


def changes_from_settings(current: Policy, settings: PolicySettings) -> PolicyChanges:
    """The changes a person's settings make to `current`; raises PolicyError naming the setting."""
    velocity = None
    if (
        settings.velocity_max_tx is not None
        or settings.velocity_max_usd is not None
        or settings.velocity_window_seconds is not None
    ):
        velocity = Velocity(
            max_tx=current.velocity.max_tx if settings.velocity_max_tx is None else settings.velocity_max_tx,
            max_usd=usd_setting("velocity-usd", settings.velocity_max_usd)
            if settings.velocity_max_usd
            else current.velocity.max_usd,
            window_seconds=current.velocity.window_seconds
            if settings.velocity_window_seconds is None
            else settings.velocity_window_seconds,
        )
    challenge = None
    if settings.challenge_hosts or settings.challenge_path_prefixes or settings.challenge_max_usd is not None:
        challenge = ChallengeRules(
            hosts=host_patterns("challenge-host", list(settings.challenge_hosts))
            if settings.challenge_hosts
            else current.challenge.hosts,
            path_prefixes=tuple(settings.challenge_path_prefixes)
            if settings.challenge_path_prefixes
            else current.challenge.path_prefixes,
            max_usd=usd_setting("challenge-max", settings.challenge_max_usd)
            if settings.challenge_max_usd
            else current.challenge.max_usd,
        )
    allow_hosts: tuple[str, ...] | None = None
    if settings.clear_allow_hosts:
        allow_hosts = ()
    elif settings.allow_hosts:
        allow_hosts = host_patterns("allow-host", list(settings.allow_hosts))
    deny_hosts: tuple[str, ...] | None = None
    if settings.clear_deny_hosts:
        deny_hosts = ()
    elif settings.deny_hosts:
        deny_hosts = host_patterns("deny-host", list(settings.deny_hosts))
    pay_to_deny: tuple[str, ...] | None = None
    if settings.clear_pay_to_deny:
        pay_to_deny = ()
    elif settings.pay_to_deny:
        pay_to_deny = _payees("pay-to-deny", settings.pay_to_deny)
    max_usd_per_tx = _optional_usd("max-per-tx", settings.max_usd_per_tx)
    daily_cap_usd = _optional_usd("daily-cap", settings.daily_cap_usd)
    step_up: Decimal | Literal[_Keep.KEEP] | None = KEEP
    if settings.step_up_threshold_usd:
        step_up = (
            None
            if settings.step_up_threshold_usd == STEP_UP_OFF
            else usd_setting("step-up", settings.step_up_threshold_usd)
        )
    return PolicyChanges(
        allow_hosts=allow_hosts,
        deny_hosts=deny_hosts,
        max_usd_per_tx=max_usd_per_tx,
        daily_cap_usd=daily_cap_usd,
        step_up_threshold_usd=step_up,
        networks=tuple(settings.networks) if settings.networks else None,
        pay_to_deny=pay_to_deny,
        velocity=velocity,
        challenge=challenge,
        allow_catalog_hosts=settings.allow_catalog_hosts,
        verified_sellers_only=settings.verified_sellers_only,
    )


def _payees(name: str, values: Sequence[str]) -> tuple[str, ...]:
    """Payee addresses as 0x and 40 hex digits, each once (compared without case)."""
    out: list[str] = []
    for value in values:
        if not _ADDRESS.fullmatch(value):
            raise PolicyError(f"{name}: {value!r} is not an address such as 0x followed by 40 hex digits")
        if value.lower() not in {kept.lower() for kept in out}:
            out.append(value)
    return tuple(out)


def _optional_usd(name: str, value: str | None) -> Decimal | None:
    return None if value is None else usd_setting(name, value)


def apply_changes(policy: Policy, changes: PolicyChanges) -> Policy:
    updates: dict[str, object] = {
        name: value
        for name, value in vars(changes).items()
        if value is not None and value is not KEEP and name != "step_up_threshold_usd"
    }
    if changes.step_up_threshold_usd is not KEEP:
        updates["step_up_threshold_usd"] = changes.step_up_threshold_usd
    if changes.challenge is not None:
        updates["challenge"] = _clean_challenge(changes.challenge)
    updated = policy.with_changes(version=policy.version + 1, **updates)
    _validate(updated)
    return updated


def _clean_challenge(challenge: ChallengeRules) -> ChallengeRules:
    """Challenge path prefixes in the form request paths are judged in."""
    prefixes: list[str] = []
    for prefix in challenge.path_prefixes:
        clean = clean_path_prefix(prefix)
        if clean is None:
            raise PolicyError(f"challenge-path: {prefix!r} is not a path prefix such as /v1/search")
        prefixes.append(clean)
    return replace(challenge, path_prefixes=tuple(prefixes))


def _validate(policy: Policy) -> None:
    if not policy.networks:
        raise PolicyError("networks: at least one network is required")
    unknown = [n for n in policy.networks if n not in SUPPORTED_NETWORKS]
    if unknown:
        raise PolicyError(f"networks: {', '.join(unknown)} is not supported")
    if len(set(policy.networks)) != len(policy.networks):
        raise PolicyError("networks: a network is listed twice")
    if policy.velocity.window_seconds < 1 or policy.velocity.window_seconds > 86_400:
        raise PolicyError("velocity window: between 1 and 86400 seconds")
    if policy.velocity.max_tx is not None and policy.velocity.max_tx < 1:
        raise PolicyError("velocity tx: at least 1")


def set_policy(
    session: Session, *, agent: Agent, changes: PolicyChanges, actor: str, now: datetime
) -> Policy:
    return _next_version(session, agent=agent, changes_to=lambda _current: changes, actor=actor, now=now)


def update_policy(
    session: Session, *, agent: Agent, settings: PolicySettings, actor: str, now: datetime
) -> Policy:
    """The next version of the agent's policy with a person's settings merged into the current one."""
    return _next_version(
        session,
        agent=agent,
        changes_to=lambda current: changes_from_settings(current, settings),
        actor=actor,
        now=now,
    )


def widened(current: Policy, updated: Policy) -> list[str]:
    """What `updated` lets the agent do that `current` did not: a higher cap or threshold, an
    allowed host or network added, a denied host or payee removed, a looser velocity or challenge
    rule, catalog hosts allowed, or unverified sellers allowed again."""
    widens = []
    if updated.max_usd_per_tx > current.max_usd_per_tx:
        widens.append("maxUsdPerTx")
    if updated.daily_cap_usd > current.daily_cap_usd:
        widens.append("dailyCapUsd")
    if not set(updated.allow_hosts) <= set(current.allow_hosts):
        widens.append("allowHosts")
    if not set(updated.deny_hosts) >= set(current.deny_hosts):
        widens.append("denyHosts")
    if _looser(current.step_up_threshold_usd, updated.step_up_threshold_usd):
        widens.append("stepUpThresholdUsd")
    if not set(updated.networks) <= set(current.networks):
        widens.append("networks")
    if not {payee.lower() for payee in updated.pay_to_deny} >= {
        payee.lower() for payee in current.pay_to_deny
    }:
        widens.append("payToDeny")
    if _velocity_looser(current.velocity, updated.velocity):
        widens.append("velocity")
    if _challenge_looser(current.challenge, updated.challenge):
        widens.append("challenge")
    if updated.allow_catalog_hosts and not current.allow_catalog_hosts:
        widens.append("allowCatalogHosts")
    if current.verified_sellers_only and not updated.verified_sellers_only:
        widens.append("verifiedSellersOnly")
    return widens


def _looser(current: Decimal | int | None, updated: Decimal | int | None) -> bool:
    """Whether a limit (None: no limit) allows more than it did."""
    return current is not None and (updated is None or updated > current)


def _velocity_looser(current: Velocity, updated: Velocity) -> bool:
    limited = current.max_tx is not None or current.max_usd is not None
    shorter = limited and updated.window_seconds < current.window_seconds
    return _looser(current.max_tx, updated.max_tx) or _looser(current.max_usd, updated.max_usd) or shorter


def _challenge_looser(current: ChallengeRules, updated: ChallengeRules) -> bool:
    """An empty list of challenge hosts or paths restricts nothing."""
    hosts = bool(current.hosts) and not (updated.hosts and set(updated.hosts) <= set(current.hosts))
    paths = bool(current.path_prefixes) and not (
        updated.path_prefixes and set(updated.path_prefixes) <= set(current.path_prefixes)
    )
    return hosts or paths or _looser(current.max_usd, updated.max_usd)


def narrow_policy(
    session: Session, *, agent: Agent, settings: PolicySettings, actor: str, now: datetime
) -> Policy:
    """Like `update_policy`, but only a change that narrows (lower caps, fewer allowed hosts and
    networks, more denied ones, tighter rules) is made; one that widens raises SudoRequired, judged against
    the version in force under the organisation's lock."""

    def narrowing(current: Policy) -> PolicyChanges:
        changes = changes_from_settings(current, settings)
        widens = widened(current, apply_changes(current, changes))
        if widens:
            raise SudoRequired(widens=tuple(widens))
        return changes

    return _next_version(session, agent=agent, changes_to=narrowing, actor=actor, now=now)


def _next_version(
    session: Session,
    *,
    agent: Agent,
    changes_to: Callable[[Policy], PolicyChanges],
    actor: str,
    now: datetime,
) -> Policy:
    lock_org(session, agent.org_id)
    current = current_policy(session, agent)
    try:
        updated = apply_changes(current, changes_to(current))
    except PolicyError as exc:
        raise InvalidPolicy(reason=str(exc)) from exc
    if replace(updated, version=current.version) == current:
        return current  # nothing to change: no new version, no audit event
    _store(session, agent=agent, policy=updated, actor=actor, now=now)
    return updated


def add_catalog_host(
    session: Session, *, agent: Agent, host: str, actor: str, now: datetime
) -> Policy | None:
    """After the first payment to a catalog host was approved and paid, the host joins the agent's
    allowed hosts (a new version, audited as policy.catalog_host_added). None if already there."""
    lock_org(session, agent.org_id)
    policy = current_policy(session, agent)
    if host in policy.allow_hosts:
        return None
    updated = policy.with_changes(version=policy.version + 1, allow_hosts=(*policy.allow_hosts, host))
    _store(session, agent=agent, policy=updated, actor=actor, now=now, event="policy.catalog_host_added")
    return updated


def _store(
    session: Session,
    *,
    agent: Agent,
    policy: Policy,
    actor: str,
    now: datetime,
    event: str = "policy.changed",
) -> None:
    document = policy.to_document()
    PolicyVersionRepository(session).add(
        PolicyVersion(
            id=new_id("policy"),
            org_id=agent.org_id,
            agent_id=agent.id,
            version=policy.version,
            document=document,
            created_by=actor,
            created_at=now,
        )
    )
    audit(
        session,
        org_id=agent.org_id,
        type=event,
        actor=actor,
        agent_id=agent.id,
        data={"version": policy.version, "policy": document},
        now=now,
    )
