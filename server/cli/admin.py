"""`paywarden admin ...`: organisations, agents, policies, wallets and tokens."""

from __future__ import annotations

import os

import typer

from auth.scopes import Scope, ScopeError, parse_scopes
from auth.tokens import DEFAULT_TTL_SECONDS, issue_access_token, revoke_token
from server.cli import admin_approvals, admin_catalog, admin_people, admin_rules
from server.cli.context import cli_context
from server.cli.output import emit, fail, reported_errors
from server.kit.clock import isoformat
from server.policy.model import ChallengeRules, PolicyError, Velocity, host_patterns, usd_setting
from server.policy.rule_service import add_rule
from server.policy.service import InvalidPolicy, PolicyChanges, current_policy, set_policy
from server.settings import BASE_SEPOLIA
from server.tenancy.service import (
    create_agent,
    create_org,
    find_agent,
    find_member,
    find_org,
    find_team,
    set_approval_ttl,
)
from server.wallets.service import import_local_key, parse_private_key

app = typer.Typer(
    help="Administer organisations, teams, members, agents, policies, rules, approvals, the catalog, "
    "wallets and tokens.",
    no_args_is_help=True,
)
org_app = typer.Typer(help="Organisations.", no_args_is_help=True)
agent_app = typer.Typer(help="Agents.", no_args_is_help=True)
policy_app = typer.Typer(help="Agents' spending policies.", no_args_is_help=True)
wallet_app = typer.Typer(help="Agents' wallets.", no_args_is_help=True)
token_app = typer.Typer(help="Access tokens.", no_args_is_help=True)
app.add_typer(org_app, name="org")
app.add_typer(agent_app, name="agent")
app.add_typer(policy_app, name="policy")
app.add_typer(wallet_app, name="wallet")
app.add_typer(token_app, name="token")
app.add_typer(admin_people.team_app, name="team")
app.add_typer(admin_people.member_app, name="member")
app.add_typer(admin_rules.app, name="rule")
app.add_typer(admin_approvals.app, name="approvals")
app.add_typer(admin_catalog.app, name="catalog")

JSON = typer.Option(False, "--json", help="Print one JSON object.")


@org_app.command("create")
def org_create(
    name: str = typer.Argument(..., help="A unique name."),
    monthly_cap: str | None = typer.Option(
        None, "--monthly-cap", help="USD per calendar month (UTC) for the whole organisation: an org rule."
    ),
    as_json: bool = JSON,
) -> None:
    """Create an organisation."""
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        now = ctx.clock.now()
        cap = None if monthly_cap is None else usd_setting("monthly-cap", monthly_cap)
        with ctx.db.write() as session:
            org = create_org(session, name=name, actor=ctx.actor, now=now)
            rule_id = None
            if cap is not None:
                rule_id = add_rule(
                    session,
                    scope="org",
                    scope_ref=org.id,
                    kind="limit",
                    host=None,
                    path_prefix=None,
                    limit_usd=cap,
                    window="month",
                    actor=ctx.actor,
                    now=now,
                ).id
        emit({"orgId": org.id, "name": org.name, "monthlyCapRuleId": rule_id}, as_json=as_json)


@org_app.command("set")
def org_set(
    org: str = typer.Argument(..., help="Organisation id or name."),
    approval_ttl: int = typer.Option(
        ..., "--approval-ttl", help="Seconds a pending approval waits (300 to 86400; default 900)."
    ),
    as_json: bool = JSON,
) -> None:
    """Change an organisation's settings."""
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            organisation = find_org(session, org)
            set_approval_ttl(
                session, org=organisation, seconds=approval_ttl, actor=ctx.actor, now=ctx.clock.now()
            )
        emit({"orgId": organisation.id, "approvalTtlSeconds": approval_ttl}, as_json=as_json)


@agent_app.command("create")
def agent_create(
    org: str = typer.Option(..., "--org", help="Organisation id or name."),
    name: str = typer.Option(..., "--name", help="A name unique in the organisation."),
    network: str = typer.Option(
        BASE_SEPOLIA, "--network", help="eip155:8453 (Base) or eip155:84532 (Base Sepolia)."
    ),
    team: str | None = typer.Option(None, "--team", help="Team id or name: the team's rules apply too."),
    member: str | None = typer.Option(
        None, "--member", help="Member id or email: the person whose daily sub-cap this agent shares."
    ),
    as_json: bool = JSON,
) -> None:
    """Create an agent. It starts with a policy that allows no host until you set one, and a
    weekly limit of 5 times its daily cap."""
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            organisation = find_org(session, org)
            agent = create_agent(
                session,
                org=organisation,
                name=name,
                network=network,
                actor=ctx.actor,
                now=ctx.clock.now(),
                team=find_team(session, team, org_id=organisation.id) if team else None,
                member=find_member(session, member, org_id=organisation.id) if member else None,
            )
        emit(
            {
                "agentId": agent.id,
                "orgId": agent.org_id,
                "name": agent.name,
                "network": agent.network,
                "teamId": agent.team_id,
                "memberId": agent.member_id,
            },
            as_json=as_json,
        )


def _optional_usd(name: str, value: str | None) -> object:
    return None if value is None else usd_setting(name, value)


@policy_app.command("set")
def policy_set(
    agent: str = typer.Argument(..., help="Agent id."),
    allow_host: list[str] = typer.Option(None, "--allow-host", help="Replace the allowed hosts (repeat)."),
    clear_allow_hosts: bool = typer.Option(False, "--clear-allow-hosts", help="Allow no host at all."),
    deny_host: list[str] = typer.Option(None, "--deny-host", help="Replace the denied hosts (repeat)."),
    max_per_tx: str | None = typer.Option(None, "--max-per-tx", help="Maximum USD per payment."),
    daily_cap: str | None = typer.Option(None, "--daily-cap", help="Maximum USD per UTC day."),
    step_up: str | None = typer.Option(None, "--step-up", help="USD from which a human approves, or 'off'."),
    network: list[str] = typer.Option(None, "--network", help="Replace the allowed networks (repeat)."),
    deny_pay_to: list[str] = typer.Option(None, "--deny-pay-to", help="Replace the denied payee addresses."),
    velocity_tx: int | None = typer.Option(None, "--velocity-tx", min=1, help="Payments per window."),
    velocity_usd: str | None = typer.Option(None, "--velocity-usd", help="USD per window."),
    velocity_window: int | None = typer.Option(None, "--velocity-window", min=1, help="Window in seconds."),
    challenge_host: list[str] = typer.Option(None, "--challenge-host", help="Challenge host patterns."),
    challenge_path: list[str] = typer.Option(None, "--challenge-path", help="Challenge path prefixes."),
    challenge_max: str | None = typer.Option(None, "--challenge-max", help="Challenge maximum USD."),
    allow_catalog_hosts: bool | None = typer.Option(None, "--allow-catalog-hosts/--no-allow-catalog-hosts"),
    verified_sellers_only: bool | None = typer.Option(
        None, "--verified-sellers-only/--no-verified-sellers-only"
    ),
    as_json: bool = JSON,
) -> None:
    """Change an agent's policy. Options you leave out keep their current value; list options
    replace the whole list. Every change is a new version."""
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        try:
            with ctx.db.write() as session:
                target = find_agent(session, agent)
                current = current_policy(session, target.id)
                velocity = None
                if velocity_tx is not None or velocity_usd is not None or velocity_window is not None:
                    velocity = Velocity(
                        max_tx=velocity_tx if velocity_tx is not None else current.velocity.max_tx,
                        max_usd=usd_setting("velocity-usd", velocity_usd)
                        if velocity_usd
                        else current.velocity.max_usd,
                        window_seconds=velocity_window or current.velocity.window_seconds,
                    )
                challenge = None
                if challenge_host or challenge_path or challenge_max is not None:
                    challenge = ChallengeRules(
                        hosts=host_patterns("challenge-host", challenge_host)
                        if challenge_host
                        else current.challenge.hosts,
                        path_prefixes=tuple(challenge_path)
                        if challenge_path
                        else current.challenge.path_prefixes,
                        max_usd=usd_setting("challenge-max", challenge_max)
                        if challenge_max
                        else current.challenge.max_usd,
                    )
                changes = PolicyChanges(
                    allow_hosts=()
                    if clear_allow_hosts
                    else (host_patterns("allow-host", allow_host) if allow_host else None),
                    deny_hosts=host_patterns("deny-host", deny_host) if deny_host else None,
                    max_usd_per_tx=_optional_usd("max-per-tx", max_per_tx),  # type: ignore[arg-type]
                    daily_cap_usd=_optional_usd("daily-cap", daily_cap),  # type: ignore[arg-type]
                    networks=tuple(network) if network else None,
                    pay_to_deny=tuple(deny_pay_to) if deny_pay_to else None,
                    velocity=velocity,
                    challenge=challenge,
                    allow_catalog_hosts=allow_catalog_hosts,
                    verified_sellers_only=verified_sellers_only,
                    **(
                        {
                            "step_up_threshold_usd": None
                            if step_up == "off"
                            else usd_setting("step-up", step_up)
                        }
                        if step_up
                        else {}
                    ),
                )
                policy = set_policy(
                    session, agent=target, changes=changes, actor=ctx.actor, now=ctx.clock.now()
                )
        except PolicyError as exc:
            raise InvalidPolicy(reason=str(exc)) from exc
        emit(
            {"agentId": target.id, "policyVersion": policy.version, "policy": policy.to_document()},
            as_json=as_json,
        )


@wallet_app.command("import")
def wallet_import(
    agent: str = typer.Argument(..., help="Agent id."),
    from_env: str = typer.Option(..., "--from-env", help="Name of the variable holding the private key."),
    as_json: bool = JSON,
) -> None:
    """Import a private key from an environment variable, sealed with the master key.

    Remove the variable afterwards; the key is never printed or stored in clear.
    """
    with reported_errors():
        ctx = cli_context(exempt=[from_env])
        ctx.require_current_schema()
        raw = os.environ.get(from_env)
        if not raw:
            fail(f"the variable {from_env} is not set")
        key = parse_private_key(raw)
        with ctx.db.write() as session:
            target = find_agent(session, agent)
            wallet = import_local_key(
                session,
                master=ctx.settings.master,
                agent=target,
                private_key=key,
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit({"agentId": target.id, "address": wallet.address, "mode": wallet.mode}, as_json=as_json)


@token_app.command("issue")
def token_issue(
    agent: str | None = typer.Option(None, "--agent", help="Agent id: an agent token for /mcp."),
    scopes: str | None = typer.Option(
        None, "--scopes", help='Space-separated, e.g. "payments:read payments:write".'
    ),
    admin: bool = typer.Option(False, "--admin", help="An admin token for /api/v1 instead."),
    org: str | None = typer.Option(None, "--org", help="Organisation, with --admin."),
    ttl: int = typer.Option(DEFAULT_TTL_SECONDS, "--ttl", help="Lifetime in seconds."),
    as_json: bool = JSON,
) -> None:
    """Issue a token. It is shown once; only its hash is stored."""
    with reported_errors():
        if admin == (agent is not None):
            fail("give either --agent AGENT --scopes ... or --admin --org ORG")
        ctx = cli_context()
        ctx.require_current_schema()
        now = ctx.clock.now()
        with ctx.db.write() as session:
            if agent is not None:
                if not scopes:
                    fail("--scopes is required with --agent")
                try:
                    granted = parse_scopes(scopes, for_agent=True)
                except ScopeError as exc:
                    fail(str(exc))
                target = find_agent(session, agent)
                issued = issue_access_token(
                    session,
                    org_id=target.org_id,
                    agent_id=target.id,
                    scopes=granted,
                    audience=ctx.settings.mcp_url,
                    ttl_seconds=ttl,
                    created_by=ctx.actor,
                    now=now,
                )
            else:
                if org is None:
                    fail("--org is required with --admin")
                organisation = find_org(session, org)
                issued = issue_access_token(
                    session,
                    org_id=organisation.id,
                    agent_id=None,
                    scopes=frozenset({Scope.ADMIN}),
                    audience=ctx.settings.admin_api_audience,
                    ttl_seconds=ttl,
                    created_by=ctx.actor,
                    now=now,
                )
        emit(
            {
                "tokenId": issued.token_id,
                "token": issued.token,
                "expiresAt": isoformat(issued.expires_at),
                "scopes": list(issued.scopes),
            },
            as_json=as_json,
        )


@token_app.command("revoke")
def token_revoke(
    token_id: str = typer.Argument(..., help="Token id (tok_...)."), as_json: bool = JSON
) -> None:
    """Revoke a token at once."""
    with reported_errors():
        ctx = cli_context()
        ctx.require_current_schema()
        with ctx.db.write() as session:
            row = revoke_token(session, token_id=token_id, actor=ctx.actor, now=ctx.clock.now())
        emit(
            {"tokenId": row.id, "revokedAt": isoformat(row.revoked_at) if row.revoked_at else None},
            as_json=as_json,
        )
