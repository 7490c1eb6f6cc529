"""`paywarden admin rule ...`: spending rules of an agent, a team, a member or an organisation.

Every change writes a new version of the rule and an audit event; only people change rules.
"""

from __future__ import annotations

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, reported_errors
from server.vocabulary import RuleKind, RuleScope, RuleWindow

app = command_group(
    "Spending rules beyond an agent's own policy.",
    example="paywarden admin rule add --scope org --id acme --kind limit --limit-usd 100 --window month",
)


@app.command("add")
def rule_add(
    scope: str = typer.Option(..., "--scope", help=" | ".join(RuleScope)),
    scope_id: str = typer.Option(..., "--id", help="The agent, team, member or organisation it is for."),
    kind: str = typer.Option(..., "--kind", help=" | ".join(RuleKind)),
    host: str | None = typer.Option(None, "--host", help="Only payments to this host (or *.domain)."),
    path_prefix: str | None = typer.Option(None, "--path-prefix", help="Only paths starting with this."),
    limit_usd: str | None = typer.Option(None, "--limit-usd", help="For a limit: USD per window."),
    window: str | None = typer.Option(
        None, "--window", help=" | ".join(RuleWindow) + " (limits; default day)"
    ),
    as_json: bool = JSON,
) -> None:
    """Add a rule. A payment must pass every rule of its agent, team, member and organisation."""
    from server.policy.model import usd_setting
    from server.policy.rulebook import add_rule, parse_scope
    from server.tenancy.service import rule_target

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        limit = None if limit_usd is None else usd_setting("limit-usd", limit_usd)
        with ctx.db.write() as session:
            rule = add_rule(
                session,
                target=rule_target(session, ctx.principal, parse_scope(scope), scope_id),
                kind=kind,
                host=host,
                path_prefix=path_prefix,
                limit_usd=limit,
                window=window,
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit(schemas.rule(rule), as_json=as_json)


@app.command("set")
def rule_set(
    rule_id: str = typer.Argument(..., help="Rule id."),
    limit_usd: str = typer.Option(..., "--limit-usd", help="The new limit in USD per window."),
    as_json: bool = JSON,
) -> None:
    """Change a limit rule's limit (a new version of the rule)."""
    from server.policy.model import usd_setting
    from server.policy.rulebook import change_rule

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            rule = change_rule(
                session,
                ctx.principal,
                rule_id=rule_id,
                limit_usd=usd_setting("limit-usd", limit_usd),
                now=ctx.clock.now(),
            )
        emit(schemas.rule(rule), as_json=as_json)


@app.command("remove")
def rule_remove(rule_id: str = typer.Argument(..., help="Rule id."), as_json: bool = JSON) -> None:
    """Remove a rule (a final version that is no longer in force)."""
    from server.policy.rulebook import remove_rule

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            rule = remove_rule(session, ctx.principal, rule_id=rule_id, now=ctx.clock.now())
        emit(schemas.rule_removed(rule), as_json=as_json)


@app.command("list")
def rule_list(
    org: str = typer.Option(..., "--org", help="Organisation id or name."), as_json: bool = JSON
) -> None:
    """The rules in force in an organisation."""
    from server.policy.rulebook import rules_of_org
    from server.tenancy.service import find_org

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.read() as session:
            organisation = find_org(session, ctx.principal, org)
            rules = rules_of_org(session, organisation.id, now=ctx.clock.now())
        emit(schemas.rules_of_org(organisation, rules), as_json=as_json)
