"""Tenant scoping in the repositories: a read by id for a principal never reaches another
organisation's rows, nor, for an agent, another agent's.

One row per repository (`CASES`), each with a factory that returns the id of a row of organisation
A that belongs to agent A1 where rows belong to agents. A test checks that the table names every
`TenantRepository` there is, so a new repository cannot be left out.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from sqlmodel import Session, col, select

import server
from auth.clients import create_admin_client
from auth.passkeys import RelyingParty, claim_challenge, register_passkey, registration_options
from auth.principal import Principal, PrincipalKind
from auth.repository import DelegableAgentRepository, GrantRepository, PasskeyRepository, TokenRepository
from auth.scopes import AGENT_SCOPES, Scope
from auth.tokens import TokenNotFound, revoke_token
from server.approvals.policy_changes import ask_for_change
from server.approvals.repository import ApprovalRepository, NotificationRepository, PolicyChangeRepository
from server.audit.repository import AuditRepository
from server.kit.clock import SystemClock
from server.kit.db import Database
from server.kit.repository import TenantRepository
from server.models import (
    AccessToken,
    ApprovalNotification,
    AuditEvent,
    OAuthGrant,
    OutOfPolicyFinding,
    PolicyVersion,
    RuleVersion,
    Wallet,
    WalletSweep,
)
from server.payments.repository import FindingRepository, IntentRepository, SweepRepository
from server.policy.repository import PolicyVersionRepository, RuleVersionRepository
from server.policy.requested_changes import parse_requested_change
from server.policy.rulebook import RuleNotFound, ScopeNotFound, add_rule, change_rule, remove_rule
from server.policy.rules import RuleTarget
from server.tenancy.changes import ask
from server.tenancy.repository import (
    AgentRepository,
    MemberRepository,
    OrganizationRepository,
    PendingChangeRepository,
    TeamRepository,
)
from server.tenancy.service import (
    AgentNotFound,
    MemberNotFound,
    OrgNotFound,
    TeamNotFound,
    find_agent_by_name,
    find_member,
    find_org,
    find_team,
    get_agent,
    rule_target,
)
from server.vocabulary import (
    ChallengePurpose,
    FindingKind,
    NotificationStatus,
    PendingChangeKind,
    RuleKind,
    RuleScope,
    RuleWindow,
    SweepStatus,
)
from server.wallets.repository import CdpCredentialsRepository, WalletRepository
from tests.support.ledger import PAYER, USDC, facts, reserve_now
from tests.support.paywarden import settings_for
from tests.support.soft_authenticator import SoftAuthenticator
from tests.support.tenants import AgentSetup, make_agent, make_member, make_team

WALLET_KEY = "0x4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"
OPERATOR = Principal.operator("test:operator")


@dataclass(frozen=True)
class World:
    """Organisation A with agents A1 (in a team, under a member) and A2; organisation B with B1."""

    a1: AgentSetup
    a2: AgentSetup
    b1: AgentSetup
    team_id: str
    member_id: str
    member_email: str
    org_rule_id: str
    org_a_name: str
    intent_id: str  # held for a person: an intent of A1 with its approval
    approval_id: str
    finding_id: str
    grant_id: str  # a connection of A1 (an admin client's grant)
    passkey_id: str  # a passkey of the member of A


@pytest.fixture
def world(db: Database) -> World:
    settings = settings_for(database_url=db.url, port=8402)
    a1 = make_agent(db, settings, allow_hosts=["api.example.com"], name="a1", wallet_key=WALLET_KEY)
    team_id = make_team(db, a1.org_id)
    member_email = "ana@example.com"
    member_id = make_member(db, a1.org_id, email=member_email)
    a2 = make_agent(db, settings, allow_hosts=["api.example.com"], org_id=a1.org_id, name="a2")
    b1 = make_agent(db, settings, allow_hosts=["api.example.com"], name="b1")
    with db.write() as session:
        org_rule_id = add_rule(
            session,
            target=RuleTarget(RuleScope.ORG, a1.org_id, a1.org_id),
            kind=RuleKind.LIMIT,
            host=None,
            path_prefix=None,
            limit_usd=Decimal("100"),
            window=RuleWindow.MONTH,
            actor="test",
            now=_now(),
        ).id
        org_a_name = find_org(session, OPERATOR, a1.org_id).name
    held = reserve_now(db, a1.agent_id, facts("scoping-0001"), _now())
    assert held.kind == "held"
    assert held.intent is not None
    assert held.approval is not None
    finding = OutOfPolicyFinding(
        id="oop_scoping",
        org_id=a1.org_id,
        agent_id=a1.agent_id,
        wallet_address=PAYER,
        network="eip155:84532",
        asset=USDC,
        tx_hash="0x" + "ab" * 32,
        log_index=0,
        block_number=1,
        kind=FindingKind.TRANSFER_WITHOUT_AUTHORIZATION,
        detected_at=_now(),
    )
    with db.write() as session:
        assert FindingRepository(session).insert_once(finding)
    with db.write() as session:
        client = create_admin_client(
            session,
            agent=get_agent(session, OPERATOR, a1.agent_id),
            name="scoping client",
            scopes=frozenset({Scope.PAYMENTS_READ}),
            resource=settings.mcp_url,
            actor="test",
            now=_now(),
        )
        grant = GrantRepository(session).live_for(
            org_id=a1.org_id, client_row_id=client.row.id, agent_id=a1.agent_id
        )
        assert grant is not None
        grant_id = grant.id
    passkey_id = _passkey(db, a1.org_id, member_id)
    return World(
        a1,
        a2,
        b1,
        team_id,
        member_id,
        member_email,
        org_rule_id,
        org_a_name,
        held.intent.id,
        held.approval.id,
        finding.id,
        grant_id,
        passkey_id,
    )


def _passkey(db: Database, org_id: str, member_id: str) -> str:
    """A passkey of the member, registered as enrolment does, with a software authenticator."""
    rp = RelyingParty(rp_id="localhost", origin="http://localhost:8402")
    authenticator = SoftAuthenticator(rp.origin)
    with db.write() as session:
        member = find_member(session, OPERATOR, member_id, org_id=org_id)
        ceremony = registration_options(
            session, rp=rp, member=member, purpose=ChallengePurpose.ADD_PASSKEY, now=_now()
        )
        challenge = claim_challenge(
            session, ceremony.challenge_id, purpose=ChallengePurpose.ADD_PASSKEY, now=_now()
        )
        return register_passkey(
            session,
            rp=rp,
            member=member,
            challenge=challenge,
            credential=authenticator.register(ceremony.options_json),
            name="scoping key",
            now=_now(),
        ).id


def _now() -> datetime:
    return SystemClock().now()


def agent(setup: AgentSetup) -> Principal:
    return Principal.for_agent(
        org_id=setup.org_id, agent_id=setup.agent_id, token_id="tok_test", scopes=AGENT_SCOPES
    )


def admin(org_id: str) -> Principal:
    return Principal.for_admin_token(org_id=org_id, token_id="tok_test", scopes=frozenset({Scope.ADMIN}))


def member(org_id: str) -> Principal:
    return Principal(PrincipalKind.MEMBER, org_id, member_id="mem_test")


def _one(session: Session, statement: Any) -> str:
    value = session.exec(statement).first()
    assert value is not None
    return str(value)


def _notification(session: Session, world: World) -> str:
    row = ApprovalNotification(
        id="ntf_scoping",
        org_id=world.a1.org_id,
        approval_id=world.approval_id,
        status=NotificationStatus.PENDING,
        created_at=SystemClock().now(),
    )
    session.add(row)
    session.flush()
    return row.id


def _pending_change(session: Session, world: World) -> str:
    row = ask(
        session,
        admin(world.a1.org_id),
        kind=PendingChangeKind.ROLE_CHANGE,
        subject_id=world.member_id,
        change={"role": "owner"},
        now=SystemClock().now(),
    )
    return row.id


def _policy_change(session: Session, world: World) -> str:
    row, _ = ask_for_change(
        session,
        agent(world.a1),
        agent_id=world.a1.agent_id,
        change=parse_requested_change({"dailyCapUsd": "500"}),
        note="Scoping.",
        now=SystemClock().now(),
    )
    return row.id


def _sweep(session: Session, world: World) -> str:
    wallet_id = _one(session, select(Wallet.id).where(Wallet.agent_id == world.a1.agent_id))
    now = SystemClock().now()
    row = WalletSweep(
        id="swp_scoping",
        org_id=world.a1.org_id,
        agent_id=world.a1.agent_id,
        wallet_id=wallet_id,
        to_wallet_id=wallet_id,
        network="eip155:84532",
        asset=USDC,
        payer=PAYER,
        pay_to=PAYER,
        amount_atomic=1,
        nonce="0x" + "cd" * 32,
        valid_after=0,
        valid_before=1,
        status=SweepStatus.EXPIRED,
        created_by="test",
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    session.flush()
    return row.id


@dataclass(frozen=True)
class Case:
    name: str
    repository: type[TenantRepository[Any]]
    row: Callable[[Session, World], str]  # the id of a row of organisation A (of agent A1)
    agent_owned: bool  # the row belongs to agent A1: agent A2 must not read it


CASES = [
    Case("organisation", OrganizationRepository, lambda s, w: w.a1.org_id, agent_owned=False),
    Case("CDP credentials", CdpCredentialsRepository, lambda s, w: w.a1.org_id, agent_owned=False),
    Case("team", TeamRepository, lambda s, w: w.team_id, agent_owned=False),
    Case("member", MemberRepository, lambda s, w: w.member_id, agent_owned=False),
    Case("agent", AgentRepository, lambda s, w: w.a1.agent_id, agent_owned=True),
    Case(
        "policy version",
        PolicyVersionRepository,
        lambda s, w: _one(s, select(PolicyVersion.id).where(PolicyVersion.agent_id == w.a1.agent_id)),
        agent_owned=True,
    ),
    Case(
        "agent rule",
        RuleVersionRepository,
        lambda s, w: _one(
            s,
            select(RuleVersion.rule_id).where(
                RuleVersion.scope == RuleScope.AGENT, RuleVersion.scope_id == w.a1.agent_id
            ),
        ),
        agent_owned=True,
    ),
    Case("organisation rule", RuleVersionRepository, lambda s, w: w.org_rule_id, agent_owned=False),
    Case("payment intent", IntentRepository, lambda s, w: w.intent_id, agent_owned=True),
    Case("approval", ApprovalRepository, lambda s, w: w.approval_id, agent_owned=True),
    Case("approval notification", NotificationRepository, _notification, agent_owned=False),
    Case("out-of-policy finding", FindingRepository, lambda s, w: w.finding_id, agent_owned=True),
    Case("wallet sweep", SweepRepository, _sweep, agent_owned=True),
    Case(
        "wallet",
        WalletRepository,
        lambda s, w: _one(s, select(Wallet.id).where(Wallet.agent_id == w.a1.agent_id)),
        agent_owned=True,
    ),
    Case(
        "token",
        TokenRepository,
        lambda s, w: _one(s, select(AccessToken.id).where(AccessToken.agent_id == w.a1.agent_id)),
        agent_owned=True,
    ),
    Case("connection", GrantRepository, lambda s, w: w.grant_id, agent_owned=True),
    Case("passkey", PasskeyRepository, lambda s, w: w.passkey_id, agent_owned=False),
    Case("pending change", PendingChangeRepository, _pending_change, agent_owned=False),
    Case("policy change request", PolicyChangeRepository, _policy_change, agent_owned=True),
    Case(
        "agent a member may connect", DelegableAgentRepository, lambda s, w: w.a1.agent_id, agent_owned=True
    ),
    Case(
        "audit event",
        AuditRepository,
        lambda s, w: _one(
            s,
            select(AuditEvent.id).where(AuditEvent.agent_id == w.a1.agent_id).order_by(col(AuditEvent.seq)),
        ),
        agent_owned=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_read_by_id_finds_nothing_outside_the_readers_reach(db: Database, world: World, case: Case) -> None:
    with db.read() as session:
        row_id = case.row(session, world)
        rows = case.repository(session)
        # Within reach: the row is there, so the refusals below are scoping, not a missing row.
        assert rows.get_readable(OPERATOR, row_id) is not None
        assert rows.get_readable(admin(world.a1.org_id), row_id) is not None
        assert rows.get_readable(member(world.a1.org_id), row_id) is not None
        assert rows.get_readable(agent(world.a1), row_id) is not None
        # Another organisation, whoever asks for it there.
        assert rows.get_readable(admin(world.b1.org_id), row_id) is None
        assert rows.get_readable(member(world.b1.org_id), row_id) is None
        assert rows.get_readable(agent(world.b1), row_id) is None
        # Another agent of the same organisation, for rows that belong to one agent.
        other_agent = rows.get_readable(agent(world.a2), row_id)
        assert (other_agent is None) is case.agent_owned


def _tenant_repositories() -> set[type[TenantRepository[Any]]]:
    found: set[type[TenantRepository[Any]]] = set()
    modules = ["auth.repository"] + [
        f"server.{info.name}.repository" for info in pkgutil.iter_modules(server.__path__) if info.ispkg
    ]
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, TenantRepository) and value is not TenantRepository:
                found.add(value)
    return found


def test_every_tenant_repository_has_a_row_in_the_table() -> None:
    assert _tenant_repositories() == {case.repository for case in CASES}


@pytest.fixture
def session(db: Database) -> Iterator[Session]:
    with db.write() as session:
        yield session


def test_lookups_by_name_email_and_scope_stay_in_the_organisation(session: Session, world: World) -> None:
    outsider = admin(world.b1.org_id)
    a1, org_a = world.a1, world.a1.org_id
    for ref in (org_a, world.org_a_name):
        with pytest.raises(OrgNotFound):
            find_org(session, outsider, ref)
        assert find_org(session, admin(org_a), ref).id == org_a
    with pytest.raises(TeamNotFound):
        find_team(session, outsider, world.team_id, org_id=org_a)
    with pytest.raises(TeamNotFound):
        find_team(session, OPERATOR, world.team_id, org_id=world.b1.org_id)
    for ref in (world.member_id, world.member_email):
        with pytest.raises(MemberNotFound):
            find_member(session, outsider, ref, org_id=org_a)
        with pytest.raises(MemberNotFound):
            find_member(session, OPERATOR, ref, org_id=world.b1.org_id)
        assert find_member(session, admin(org_a), ref, org_id=org_a).id == world.member_id
    assert find_agent_by_name(session, outsider, org_id=org_a, name="a1") is None
    assert find_agent_by_name(session, agent(world.a2), org_id=org_a, name="a1") is None
    with pytest.raises(AgentNotFound):
        get_agent(session, outsider, a1.agent_id)
    with pytest.raises(AgentNotFound):
        get_agent(session, agent(world.a2), a1.agent_id)
    assert get_agent(session, agent(a1), a1.agent_id).id == a1.agent_id
    for scope, ref in (
        (RuleScope.ORG, org_a),
        (RuleScope.ORG, world.org_a_name),
        (RuleScope.TEAM, world.team_id),
        (RuleScope.MEMBER, world.member_id),
        (RuleScope.AGENT, a1.agent_id),
    ):
        with pytest.raises(ScopeNotFound):
            rule_target(session, outsider, scope, ref)
        assert rule_target(session, admin(org_a), scope, ref).org_id == org_a


def test_rules_and_tokens_are_changed_only_within_reach(session: Session, world: World) -> None:
    outsider = admin(world.b1.org_id)
    with pytest.raises(RuleNotFound):
        change_rule(session, outsider, rule_id=world.org_rule_id, limit_usd=Decimal("1"), now=_now())
    with pytest.raises(RuleNotFound):
        remove_rule(session, outsider, rule_id=world.org_rule_id, now=_now())
    token_id = _one(session, select(AccessToken.id).where(AccessToken.agent_id == world.a1.agent_id))
    with pytest.raises(TokenNotFound):
        revoke_token(session, outsider, token_id=token_id, now=_now())
    with pytest.raises(TokenNotFound):
        revoke_token(session, agent(world.a2), token_id=token_id, now=_now())
    assert revoke_token(session, admin(world.a1.org_id), token_id=token_id, now=_now()).revoked_at is not None
    assert remove_rule(session, admin(world.a1.org_id), rule_id=world.org_rule_id, now=_now()).id == (
        world.org_rule_id
    )


def test_lookups_that_name_an_organisation_find_nothing_of_another(db: Database, world: World) -> None:
    """The reads that take an organisation's id, given organisation B and A1's ids, find nothing."""
    a, b, agent_id = world.a1.org_id, world.b1.org_id, world.a1.agent_id
    with db.write() as session:
        versions = PolicyVersionRepository(session)
        newest = versions.newest_id_for_agent(org_id=a, agent_id=agent_id)
        assert newest is not None
        assert versions.newest_id_for_agent(org_id=b, agent_id=agent_id) is None
        assert versions.by_id(org_id=a, version_id=newest) is not None
        assert versions.by_id(org_id=b, version_id=newest) is None

        wallets = WalletRepository(session)
        assert wallets.active_for_agent(org_id=a, agent_id=agent_id) is not None
        assert wallets.active_for_agent(org_id=b, agent_id=agent_id) is None

        passkeys = PasskeyRepository(session)
        assert passkeys.count_of_member(org_id=a, member_id=world.member_id) == 1
        assert passkeys.count_of_member(org_id=b, member_id=world.member_id) == 0

        tokens = TokenRepository(session)
        assert tokens.agent_enabled(org_id=a, agent_id=agent_id)
        assert not tokens.agent_enabled(org_id=b, agent_id=agent_id)

        grant = session.get(OAuthGrant, world.grant_id)
        assert grant is not None
        grants = GrantRepository(session)
        assert grants.live_for(org_id=a, client_row_id=grant.client_id, agent_id=agent_id) is not None
        assert grants.live_for(org_id=b, client_row_id=grant.client_id, agent_id=agent_id) is None
        assert tokens.revoke_of_grant(org_id=b, grant_id=world.grant_id, now=_now()) == 0

        outbox = NotificationRepository(session)
        assert outbox.member_email(org_id=a, member_id=world.member_id) == world.member_email
        assert outbox.member_email(org_id=b, member_id=world.member_id) is None
