"""`paywarden admin wallet`: import a key, rotate to a new wallet, list an agent's wallets, and sweep
what is left in retired ones into the current one."""

from __future__ import annotations

import os

import anyio
import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

app = command_group(
    "Agents' wallets.", example="paywarden admin wallet import researcher --from-env WALLET_KEY"
)


@app.command("import")
def wallet_import(
    agent: str = typer.Argument(..., help="Agent id or name."),
    from_env: str = typer.Option(..., "--from-env", help="Name of the variable holding the private key."),
    as_json: bool = JSON,
) -> None:
    """Import a private key from an environment variable, sealed with the master key.

    Remove the variable afterwards; the key is never printed or stored in clear.
    """
    from server.tenancy.service import find_agent
    from server.wallets.service import import_local_key, parse_private_key

    with reported_errors():
        ctx = cli_context(exempt=[from_env])
        ctx.ready()
        raw = os.environ.get(from_env)
        if not raw:
            fail(f"the variable {from_env} is not set")
        key = parse_private_key(raw)
        with ctx.db.write() as session:
            target = find_agent(session, ctx.principal, agent)
            wallet = import_local_key(
                session,
                master=ctx.master,
                agent=target,
                private_key=key,
                actor=ctx.actor,
                now=ctx.clock.now(),
            )
        emit(schemas.wallet(wallet), as_json=as_json)


def _key_from(variable: str) -> bytes:
    """A private key read once from the named variable (never from an argument)."""
    from server.wallets.service import parse_private_key

    raw = os.environ.get(variable)
    if not raw:
        fail(f"the variable {variable} is not set")
    return parse_private_key(raw)


@app.command("rotate")
def wallet_rotate(
    agent: str = typer.Option(..., "--agent", help="Agent id or name."),
    from_env: str | None = typer.Option(
        None, "--from-env", help="Name of a variable holding the new key; without it, a key is made here."
    ),
    as_json: bool = JSON,
) -> None:
    """Move the agent to a new wallet, in one transaction, and retire the one it has.

    A `local_key` wallet moves to a key made here (or the one --from-env names). A `cdp` wallet
    moves to the next account of the organisation's CDP project, under the agent's next stable
    name and its own policy; the retired account's policy at CDP becomes sweep-only. New payments
    sign with the new wallet at once, in every server process; a payment already reserved on the
    old one still settles from it. The old wallet stays listed (`wallet list`) so what is left in
    it can be swept (`wallet sweep`). Only the new address is printed.
    """
    from server.wallet_policies.rotation import rotate_agent_wallet

    with reported_errors():
        ctx = cli_context(exempt=[from_env] if from_env else [])
        ctx.ready()
        key = _key_from(from_env) if from_env else None
        rotated = anyio.run(
            lambda: rotate_agent_wallet(
                ctx.db,
                principal=ctx.principal,
                agent_ref=agent,
                private_key=key,
                reach=ctx.cdp_reach,
                clock=ctx.clock,
            )
        )
        emit(schemas.wallet_rotated(rotated), as_json=as_json)


@app.command("list")
def wallet_list(
    agent: str = typer.Option(..., "--agent", help="Agent id or name."),
    as_json: bool = JSON,
) -> None:
    """The agent's wallets, current and retired, with their USDC balances and sweeps.

    A balance is read from each network with an RPC configured (PAYWARDEN_RPC_URLS), at once and
    for at most two seconds; one that cannot be read says why.
    """
    from server.chain.service import ChainService
    from server.payments.sweeps.listing import agent_wallets

    with reported_errors():
        ctx = cli_context()
        ctx.ready()
        chain = ChainService(ctx.settings.rpc_urls)

        async def listing() -> schemas.Document:
            try:
                found = await agent_wallets(ctx.db, chain, ctx.settings, ctx.principal, agent=agent)
            finally:
                await chain.aclose()
            return schemas.agent_wallets(found)

        emit(anyio.run(listing), as_json=as_json, human=schemas.agent_wallets_text)


# The command's exit code when a sweep is not finished: signed for the operator to send, sent but
# not mined, or mined but not yet under enough blocks. Running it again carries on.
NOT_FINISHED = 3


@app.command("sweep")
def wallet_sweep(
    agent: str = typer.Option(..., "--agent", help="Agent id or name."),
    wallet: str | None = typer.Option(
        None, "--wallet", help="One retired wallet, by id or address; without it, every retired wallet."
    ),
    network: str | None = typer.Option(
        None, "--network", help="One network; without it, every network with an RPC and USDC configured."
    ),
    gas_from_env: str | None = typer.Option(
        None,
        "--gas-from-env",
        help="Name of a variable holding the key of an account that pays the gas and sends the "
        "transaction; without it, the signed authorisation and its calldata are printed.",
    ),
    wait: float = typer.Option(60.0, "--wait", min=0, max=3600, help="Seconds to wait for the chain."),
    as_json: bool = JSON,
) -> None:
    """Move what is left in the agent's retired wallets to its current wallet: the whole USDC
    balance of each, on each network, by one transfer its own key signs.

    Payments from a retired wallet that may still settle are checked on-chain first; a sweep waits
    for them. A sweep is done once its transfer is found on-chain under the network's confirmations
    (PAYWARDEN_CONFIRMATIONS). Exits 0 when every sweep is done (or there was nothing to sweep), and
    3 when one is not finished yet: run the command again, and it carries on without a second
    transfer.
    """
    from server.chain.service import ChainService
    from server.chain.submission import GasPayer
    from server.payments.sweeps.sweeper import Sweeper

    with reported_errors():
        ctx = cli_context(exempt=[gas_from_env] if gas_from_env else [])
        ctx.ready()
        gas_payer = GasPayer(_key_from(gas_from_env)) if gas_from_env else None
        chain = ChainService(ctx.settings.rpc_urls, confirmations=ctx.settings.confirmations)
        sweeper = Sweeper(db=ctx.db, chain=chain, settings=ctx.settings, master=ctx.master, clock=ctx.clock)

        async def sweep() -> schemas.Document:
            try:
                outcomes = await sweeper.sweep(
                    ctx.principal,
                    agent=agent,
                    wallet=wallet,
                    network=network,
                    gas_payer=gas_payer,
                    wait_seconds=wait,
                )
            finally:
                await chain.aclose()
            return schemas.sweeps(outcomes)

        document = anyio.run(sweep)
        emit(document, as_json=as_json, human=schemas.sweeps_text)
        if any(item["outcome"] not in schemas.SWEEP_DONE for item in document["sweeps"]):
            raise typer.Exit(NOT_FINISHED)
