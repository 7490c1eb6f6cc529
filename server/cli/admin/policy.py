"""`paywarden admin policy set`: change an agent's policy; the policy service merges the options."""

from __future__ import annotations

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, reported_errors

app = command_group(
    "Agents' spending policies.",
    example="paywarden admin policy set researcher --allow-host api.example.com --daily-cap 5",
)


@app.command("set")
def policy_set(
    agent: str = typer.Argument(..., help="Agent id or name."),
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
    from server.policy.service import PolicySettings, update_policy
    from server.tenancy.service import find_agent

    settings = PolicySettings(
        allow_hosts=tuple(allow_host or ()),
        clear_allow_hosts=clear_allow_hosts,
        deny_hosts=tuple(deny_host or ()),
        max_usd_per_tx=max_per_tx,
        daily_cap_usd=daily_cap,
        step_up_threshold_usd=step_up,
        networks=tuple(network or ()),
        pay_to_deny=tuple(deny_pay_to or ()),
        velocity_max_tx=velocity_tx,
        velocity_max_usd=velocity_usd,
        velocity_window_seconds=velocity_window,
        challenge_hosts=tuple(challenge_host or ()),
        challenge_path_prefixes=tuple(challenge_path or ()),
        challenge_max_usd=challenge_max,
        allow_catalog_hosts=allow_catalog_hosts,
        verified_sellers_only=verified_sellers_only,
    )
    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        with ctx.db.write() as session:
            target = find_agent(session, ctx.principal, agent)
            policy = update_policy(
                session, agent=target, settings=settings, actor=ctx.actor, now=ctx.clock.now()
            )
        emit(schemas.policy(target, policy), as_json=as_json)
