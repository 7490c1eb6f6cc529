"""`paywarden admin org ...`: create organisations and change their settings."""

from __future__ import annotations

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, reported_errors
from server.vocabulary import RuleKind, RuleScope, RuleWindow

app = command_group("Organisations.", example="paywarden admin org create acme --monthly-cap 500")


@app.command("create")
def org_create(
    name: str = typer.Argument(..., help="A unique name."),
    monthly_cap: str | None = typer.Option(
        None, "--monthly-cap", help="USD per calendar month (UTC) for the whole organisation: an org rule."
    ),
    as_json: bool = JSON,
) -> None:
    """Create an organisation."""
    from server.policy.model import usd_setting
    from server.policy.rulebook import add_rule
    from server.policy.rules import RuleTarget
    from server.tenancy.service import create_org

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        now = ctx.clock.now()
        cap = None if monthly_cap is None else usd_setting("monthly-cap", monthly_cap)
        with ctx.db.write() as session:
            org = create_org(session, name=name, actor=ctx.actor, now=now)
            rule_id = None
            if cap is not None:
                rule_id = add_rule(
                    session,
                    target=RuleTarget(RuleScope.ORG, org.id, org.id),
                    kind=RuleKind.LIMIT,
                    host=None,
                    path_prefix=None,
                    limit_usd=cap,
                    window=RuleWindow.MONTH,
                    actor=ctx.actor,
                    now=now,
                ).id
        emit(schemas.org_created(org, monthly_cap_rule_id=rule_id), as_json=as_json)


@app.command("set")
def org_set(
    org: str = typer.Argument(..., help="Organisation id or name."),
    approval_ttl: int = typer.Option(
        ..., "--approval-ttl", help="Seconds a pending approval waits (300 to 86400; default 900)."
    ),
    as_json: bool = JSON,
) -> None:
    """Change an organisation's settings."""
    from server.tenancy.service import find_org, set_approval_ttl

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            organisation = find_org(session, ctx.principal, org)
            set_approval_ttl(
                session, org=organisation, seconds=approval_ttl, actor=ctx.actor, now=ctx.clock.now()
            )
        emit(schemas.org_settings(organisation), as_json=as_json)
