"""Set up organisations, agents, policies, wallets and tokens for tests, through the services
the CLI uses (never by writing rows by hand)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from urllib.parse import urlsplit

from auth.scopes import AGENT_SCOPES, Scope
from auth.tokens import issue_access_token
from server.catalog.service import add_entry
from server.kit.clock import Clock, SystemClock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.policy.model import host_patterns
from server.policy.service import KEEP, PolicyChanges, set_policy
from server.settings import Settings
from server.tenancy.service import (
    create_agent,
    create_member,
    create_org,
    create_team,
    find_member,
    find_org,
    find_team,
    get_agent,
)
from server.vocabulary import Role
from server.wallets.service import import_local_key, parse_private_key
from tests.support.principals import OPERATOR

ACTOR = "test:setup"


@dataclass(frozen=True)
class AgentSetup:
    org_id: str
    agent_id: str
    token: str


def make_agent(
    db: Database,
    settings: Settings,
    *,
    allow_hosts: list[str],
    max_per_tx: str = "1.00",
    daily_cap: str = "10.00",
    network: str = "eip155:84532",
    wallet_key: str | None = None,
    scopes: frozenset[Scope] = AGENT_SCOPES,
    org_name: str | None = None,
    step_up: str | None = None,
    org_id: str | None = None,
    team_id: str | None = None,
    member_id: str | None = None,
    name: str = "agent",
    clock: Clock | None = None,
) -> AgentSetup:
    """An agent with a policy and a token, in a new organisation unless `org_id` names one.

    `clock` must be the server's when the server runs on a frozen clock: the token's expiry is
    stamped from it."""
    import secrets

    now = _now(clock)
    with db.write() as session:
        if org_id is not None:
            org = find_org(session, OPERATOR, org_id)
        else:
            org = create_org(session, name=org_name or f"org-{secrets.token_hex(4)}", actor=ACTOR, now=now)
        agent = create_agent(
            session,
            org=org,
            name=name,
            network=network,
            actor=ACTOR,
            now=now,
            team=find_team(session, OPERATOR, team_id, org_id=org.id) if team_id else None,
            member=find_member(session, OPERATOR, member_id, org_id=org.id) if member_id else None,
        )
        changes = PolicyChanges(
            allow_hosts=host_patterns("allow", allow_hosts),
            max_usd_per_tx=Decimal(max_per_tx),
            daily_cap_usd=Decimal(daily_cap),
            step_up_threshold_usd=Decimal(step_up) if step_up else KEEP,
        )
        set_policy(session, agent=agent, changes=changes, actor=ACTOR, now=now)
        if wallet_key is not None:
            import_local_key(
                session,
                master=settings.master,
                agent=agent,
                private_key=parse_private_key(wallet_key),
                actor=ACTOR,
                now=now,
            )
        issued = issue_access_token(
            session,
            org_id=org.id,
            agent_id=agent.id,
            scopes=scopes,
            audience=settings.mcp_url,
            ttl_seconds=3600,
            created_by=ACTOR,
            now=now,
        )
    return AgentSetup(org.id, agent.id, issued.token)


def change_policy(db: Database, agent_id: str, changes: PolicyChanges, *, clock: Clock | None = None) -> int:
    with db.write() as session:
        agent = get_agent(session, OPERATOR, agent_id)
        return set_policy(session, agent=agent, changes=changes, actor=ACTOR, now=_now(clock)).version


def master_of(settings: Settings) -> MasterKey:
    return settings.master


def pin_payee(
    db: Database,
    *,
    url: str,
    pay_to: str,
    price_usd: str = "0.01",
    name: str = "Test seller",
    clock: Clock | None = None,
) -> None:
    """List the seller of `url` in the catalog with `pay_to` pinned as its payee.

    A payee the organisation never paid is held for a human (`new_pay_to`) unless the catalog pins
    it for that host; tests that are not about that hold pin the test seller's payee.
    """
    with db.write() as session:
        add_entry(
            session,
            name=name,
            host=urlsplit(url).hostname or "",
            url=url,
            price_usd=Decimal(price_usd),
            network="eip155:84532",
            category="testing",
            pay_to=[pay_to],
            actor=ACTOR,
            now=_now(clock),
        )


def make_team(db: Database, org_id: str, name: str = "team", *, clock: Clock | None = None) -> str:
    with db.write() as session:
        return create_team(
            session, org=find_org(session, OPERATOR, org_id), name=name, actor=ACTOR, now=_now(clock)
        ).id


def make_member(
    db: Database,
    org_id: str,
    *,
    role: Role | str = Role.APPROVER,
    email: str | None = None,
    clock: Clock | None = None,
) -> str:
    import secrets

    with db.write() as session:
        created = create_member(
            session,
            org=find_org(session, OPERATOR, org_id),
            email=email or f"person-{secrets.token_hex(3)}@example.com",
            role=Role(role),
            actor=ACTOR,
            now=_now(clock),
        )
        return created.member.id


def _now(clock: Clock | None) -> datetime:
    """The time to stamp rows with: the server's clock when it is frozen, else the machine's."""
    return (clock or SystemClock()).now()
