"""`paywarden admin wallet connect-cdp` (and `wallet cdp AGENT`): give an agent a Coinbase CDP
account as its wallet; `paywarden admin wallet cdp-policy check|sync`: the account's own policy
at CDP, compared with the agent's or sent again.

The organisation's CDP secrets (API key id, API key secret, wallet secret) are never arguments: they
come from three named variables, or standard input (three lines; an EC key in PEM may span lines;
typed at a terminal, they are not shown), or, once saved, from the database (`--saved-credentials`).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import typer

from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

if TYPE_CHECKING:
    from server.models import Wallet
    from server.signers.cdp_credentials import CdpCredentials

KEY_ID_ENV = typer.Option(None, "--api-key-id-env", help="Variable holding the CDP API key id.")
KEY_SECRET_ENV = typer.Option(None, "--api-key-secret-env", help="Variable holding the CDP API key secret.")
WALLET_SECRET_ENV = typer.Option(None, "--wallet-secret-env", help="Variable holding the CDP wallet secret.")
SAVED = typer.Option(
    False,
    "--saved-credentials",
    help="Use the organisation's CDP credentials saved by an earlier connect-cdp.",
)
ACCOUNT_NAME = typer.Option(
    None, "--account-name", help="The account's name at CDP (default: one made from organisation and agent)."
)

cdp_policy = command_group(
    "A CDP wallet's own policy at Coinbase CDP, compiled from the agent's.",
    example="paywarden admin wallet cdp-policy check --agent researcher",
)


def register(wallet: typer.Typer) -> None:
    """Add the CDP commands to `paywarden admin wallet`."""
    wallet.command("connect-cdp")(connect_cdp)
    wallet.command("cdp")(connect_cdp)
    wallet.add_typer(cdp_policy, name="cdp-policy")


def _stdin_secrets() -> list[str]:
    if sys.stdin.isatty():
        import getpass

        return [
            input("CDP API key id: "),
            getpass.getpass("CDP API key secret (not shown): "),
            getpass.getpass("CDP wallet secret (not shown): "),
        ]
    lines = [line.strip() for line in sys.stdin.read().splitlines() if line.strip()]
    values: list[str] = []
    while lines:
        line = lines.pop(0)
        if line.startswith("-----BEGIN"):  # a PEM key: up to its END line
            block = [line]
            while lines and not block[-1].startswith("-----END"):
                block.append(lines.pop(0))
            line = "\n".join(block) + "\n"
        values.append(line)
    return values


def _credentials(names: tuple[str | None, str | None, str | None]) -> CdpCredentials:
    from server.signers.cdp_credentials import credentials_from_text

    if any(names):
        if not all(names):
            fail("give all three of --api-key-id-env, --api-key-secret-env and --wallet-secret-env, or none")
        values = [os.environ.get(name or "", "") for name in names]
        missing = [name for name, value in zip(names, values, strict=True) if not value.strip()]
        if missing:
            fail(f"the variable {missing[0]} is not set")
    else:
        values = _stdin_secrets()
        if len(values) != 3:
            fail(
                "give the CDP API key id, API key secret and wallet secret on standard input, one after "
                "the other (or name three variables with --api-key-id-env, --api-key-secret-env and "
                "--wallet-secret-env, or use --saved-credentials)"
            )
    return credentials_from_text(*values)


def _connected(wallet: Wallet) -> dict[str, Any]:
    return {
        "agentId": wallet.agent_id,
        "address": wallet.address,
        "mode": str(wallet.mode),
        "accountName": wallet.account_name,
        "cdpPolicyId": wallet.cdp_policy_id,
        "policyVersion": wallet.cdp_policy_version,
    }


def _connect(
    agent: str,
    account_name: str | None,
    names: tuple[str | None, str | None, str | None],
    saved: bool,
    as_json: bool,
) -> None:
    import anyio

    from server.wallet_policies.accounts import provision_cdp_account

    with reported_errors():
        if saved and any(names):
            fail("--saved-credentials uses the saved ones: give no variables with it")
        ctx = cli_context(exempt=[name for name in names if name])
        ctx.ready()
        credentials = None if saved else _credentials(names)
        wallet = anyio.run(
            lambda: provision_cdp_account(
                ctx.db,
                principal=ctx.principal,
                agent_ref=agent,
                master=ctx.master,
                api_url=ctx.settings.cdp_api_url,
                usdc_by_network=ctx.settings.assets,
                clock=ctx.clock,
                account_name=account_name,
                credentials=credentials,
            )
        )
        emit(_connected(wallet), as_json=as_json)


def connect_cdp(
    agent_argument: str | None = typer.Argument(
        None, metavar="[AGENT]", help="Agent id or name (or --agent)."
    ),
    agent: str | None = typer.Option(None, "--agent", help="Agent id or name."),
    account_name: str | None = ACCOUNT_NAME,
    api_key_id_env: str | None = KEY_ID_ENV,
    api_key_secret_env: str | None = KEY_SECRET_ENV,
    wallet_secret_env: str | None = WALLET_SECRET_ENV,
    saved_credentials: bool = SAVED,
    as_json: bool = JSON,
) -> None:
    """Give an agent a Coinbase CDP account as its wallet: the key stays at CDP.

    The account (its name made from organisation and agent, or --account-name) is fetched or made
    at CDP under its own policy, compiled from the agent's, and becomes the agent's wallet. The
    organisation's secrets come from standard input (three lines: API key id, API key secret,
    wallet secret), from three named variables, or, once saved, with --saved-credentials; they are
    sealed with the master key only once CDP accepted them. `wallet cdp AGENT` is the same command.
    """
    if (agent_argument is None) == (agent is None):
        fail("name the agent once: as --agent AGENT, or as the argument AGENT")
    names = (api_key_id_env, api_key_secret_env, wallet_secret_env)
    _connect(agent or agent_argument or "", account_name, names, saved_credentials, as_json)


@cdp_policy.command("check")
def check(
    agent: str = typer.Option(..., "--agent", help="Agent id or name."),
    as_json: bool = JSON,
) -> None:
    """Compare the policy CDP holds for the agent's wallet with the one compiled from its policy now.

    Exits 0 when they are the same, 1 with each difference when they are not.
    """
    import anyio

    from server.wallet_policies.sync import agent_work, drift_of

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        reach = ctx.cdp_reach
        with ctx.db.read() as session:
            work = agent_work(session, ctx.principal, agent, usdc_by_network=reach.usdc_by_network)
        drift = anyio.run(lambda: drift_of(work, reach=reach))
        wallet = work.wallet
        emit(
            {
                "agentId": wallet.agent_id,
                "address": wallet.address,
                "accountName": wallet.account_name,
                "cdpPolicyId": drift.policy_id,
                "inStep": drift.in_step,
                "policyVersion": drift.version,
                "sentVersion": wallet.cdp_policy_version,
                "sentAt": wallet.cdp_policy_synced_at,
                "lastError": wallet.cdp_policy_error,
                "differences": list(drift.findings),
            },
            as_json=as_json,
        )
        if not drift.in_step:
            raise typer.Exit(1)


@cdp_policy.command("sync")
def sync(
    agent: str = typer.Option(..., "--agent", help="Agent id or name."),
    as_json: bool = JSON,
) -> None:
    """Send the agent's wallet policy to CDP now (the background job does it within seconds of a
    change; this does it at once, and repairs a policy changed at CDP), and the sweep-only policy
    of each of its retired CDP accounts. Exits 1 when CDP did not take one: the wallet then says
    why, and the job tries again."""
    import anyio

    from server.wallet_policies.sync import sync_agent

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        synced = anyio.run(
            lambda: sync_agent(
                ctx.db, principal=ctx.principal, agent_ref=agent, reach=ctx.cdp_reach, clock=ctx.clock
            )
        )
        current = {} if synced.wallet is None else _sent(synced.wallet)
        retired = [{"walletId": wallet.id, **_sent(wallet)} for wallet in synced.retired]
        emit({**current, "retired": retired}, as_json=as_json)
        if synced.failed:
            raise typer.Exit(1)


def _sent(wallet: Wallet) -> dict[str, Any]:
    return {
        **_connected(wallet),
        "sentAt": wallet.cdp_policy_synced_at,
        "lastError": wallet.cdp_policy_error,
        "nextAttemptAt": wallet.cdp_policy_retry_at,
    }
