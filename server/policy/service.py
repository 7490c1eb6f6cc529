"""Read and change agents' policies. A change never edits a row: it writes the next version."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from sqlmodel import Session, col, select

from server.audit.service import record as audit
from server.kit.db import lock_org
from server.kit.errors import PaywardenError
from server.kit.ids import new_id
from server.models import Agent, PolicyVersion
from server.policy.model import ChallengeRules, Policy, PolicyError, Velocity
from server.policy.rules import clean_path_prefix
from server.settings import SUPPORTED_NETWORKS

_UNSET = object()
# The functions that write policy versions; a static test checks which MCP tools can reach them.
WRITERS = ("create_initial_policy", "set_policy", "add_catalog_host")


class PolicyNotFound(PaywardenError):
    code = "control_plane_unavailable"
    message = "The agent's policy could not be loaded, so nothing was requested."


class InvalidPolicy(PaywardenError):
    code = "invalid_policy"
    message = "The policy change was refused. See reason."


@dataclass(frozen=True)
class PolicyChanges:
    """Fields to change; None leaves a field as it is in the current version."""

    allow_hosts: tuple[str, ...] | None = None
    deny_hosts: tuple[str, ...] | None = None
    max_usd_per_tx: Decimal | None = None
    daily_cap_usd: Decimal | None = None
    step_up_threshold_usd: Decimal | object | None = _UNSET
    networks: tuple[str, ...] | None = None
    pay_to_deny: tuple[str, ...] | None = None
    velocity: Velocity | None = None
    challenge: ChallengeRules | None = None
    allow_catalog_hosts: bool | None = None
    verified_sellers_only: bool | None = None


def initial_policy(network: str) -> Policy:
    return Policy(version=1, networks=(network,))


def create_initial_policy(session: Session, *, agent: Agent, actor: str, now: datetime) -> Policy:
    policy = initial_policy(agent.network)
    _store(session, agent=agent, policy=policy, actor=actor, now=now)
    return policy


def current_policy(session: Session, agent_id: str) -> Policy:
    row = session.exec(
        select(PolicyVersion)
        .where(PolicyVersion.agent_id == agent_id)
        .order_by(col(PolicyVersion.version).desc())
    ).first()
    if row is None:
        raise PolicyNotFound()
    return Policy.from_document(row.version, row.document)


def apply_changes(policy: Policy, changes: PolicyChanges) -> Policy:
    updates: dict[str, object] = {
        name: value
        for name, value in vars(changes).items()
        if value is not None and value is not _UNSET and name != "step_up_threshold_usd"
    }
    if changes.step_up_threshold_usd is not _UNSET:
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
    lock_org(session, agent.org_id)
    try:
        updated = apply_changes(current_policy(session, agent.id), changes)
    except PolicyError as exc:
        raise InvalidPolicy(reason=str(exc)) from exc
    _store(session, agent=agent, policy=updated, actor=actor, now=now)
    return updated


def add_catalog_host(
    session: Session, *, agent: Agent, host: str, actor: str, now: datetime
) -> Policy | None:
    """After the first payment to a catalog host was approved and paid, the host joins the agent's
    allowed hosts (a new version, audited as policy.catalog_host_added). None if already there."""
    lock_org(session, agent.org_id)
    policy = current_policy(session, agent.id)
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
    session.add(
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
    session.flush()
    audit(
        session,
        org_id=agent.org_id,
        type=event,
        actor=actor,
        agent_id=agent.id,
        data={"version": policy.version, "policy": document},
        now=now,
    )
