"""`paywarden admin ...`: one module per command group, each a thin layer over the domain services.

Commands act as the operator (`CliContext.principal`), open one unit of work, and print what the
services return through server/cli/schemas.py.
"""

from __future__ import annotations

from server.cli.admin import (
    agent,
    approvals,
    audit,
    catalog,
    client,
    master_key,
    member,
    org,
    payments,
    policy,
    rule,
    team,
    token,
    wallet,
    wallet_cdp,
)
from server.cli.output import command_group

app = command_group(
    "Administer organisations, teams, members, agents, policies, rules, approvals, the catalog, "
    "wallets, tokens, OAuth clients, payments, the audit log's events and the master key.",
    example="paywarden admin agent list --org acme",
)
app.add_typer(org.app, name="org")
app.add_typer(agent.app, name="agent")
app.add_typer(policy.app, name="policy")
wallet_cdp.register(wallet.app)
app.add_typer(wallet.app, name="wallet")
app.add_typer(token.app, name="token")
app.add_typer(client.app, name="client")
app.add_typer(team.app, name="team")
app.add_typer(member.app, name="member")
app.add_typer(rule.app, name="rule")
app.add_typer(approvals.app, name="approvals")
app.add_typer(catalog.app, name="catalog")
app.add_typer(payments.app, name="payments")
app.add_typer(audit.app, name="audit")
app.add_typer(master_key.app, name="master-key")
