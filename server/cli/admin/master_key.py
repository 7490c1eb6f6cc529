"""`paywarden admin master-key rotate`: re-seal every secret under a new master key."""

from __future__ import annotations

import os
import sys

import typer

from server.cli import schemas
from server.cli.context import cli_context
from server.cli.output import JSON, command_group, emit, fail, reported_errors

app = command_group(
    "The master key that seals wallet keys and other secrets.",
    example="paywarden admin master-key rotate --generate",
)


@app.command("rotate")
def rotate(
    from_env: str | None = typer.Option(
        None, "--from-env", help="Name of the variable holding the new key (pwmk_...)."
    ),
    from_stdin: bool = typer.Option(False, "--stdin", help="Read the new key from standard input."),
    generate: bool = typer.Option(
        False, "--generate", help="Make the new key here and write it to the key file (SQLite)."
    ),
    as_json: bool = JSON,
) -> None:
    """Re-seal every sealed value under a new master key, in one transaction.

    Stop every other Paywarden process first. The new key is never an argument: it is read from a
    named variable or standard input, or made here with --generate. When the key lives in the key
    file next to the SQLite database, the new key replaces it once the database has taken it; with
    PAYWARDEN_MASTER_KEY, set the variable to the new key before starting anything again.
    """
    from server.kit.crypto import (
        MasterKey,
        MasterKeyError,
        install_master_key_file,
        write_pending_master_key_file,
    )
    from server.wallets.rotation import rotate_master_key

    with reported_errors():
        if sum((from_env is not None, from_stdin, generate)) != 1:
            fail("give the new master key with exactly one of --from-env NAME, --stdin or --generate")
        ctx = cli_context(exempt=[from_env] if from_env else [])
        ctx.ready()
        key_file = ctx.settings.master_key_file
        if generate and key_file is None:
            fail(
                "--generate writes the key file, and PAYWARDEN_MASTER_KEY is in use instead: "
                "give the new key with --from-env NAME or --stdin"
            )
        if generate:
            new = MasterKey.generate()
        else:
            text = os.environ.get(from_env, "") if from_env else sys.stdin.readline()
            if not text.strip():
                fail(f"the variable {from_env} is not set" if from_env else "no key on standard input")
            try:
                new = MasterKey.parse(text)
            except MasterKeyError:
                fail("the new master key is not one: pwmk_ followed by 32 bytes in base64url")
        pending = write_pending_master_key_file(key_file, new) if key_file is not None else None
        try:
            with ctx.db.write() as session:
                rotation = rotate_master_key(
                    session, current=ctx.master, new=new, actor=ctx.actor, now=ctx.clock.now()
                )
        except BaseException:
            if pending is not None:
                pending.unlink(missing_ok=True)
            raise
        if pending is not None and key_file is not None:
            install_master_key_file(pending, key_file)
        else:
            typer.echo(
                "the database now takes only the new key: set PAYWARDEN_MASTER_KEY to it for every "
                "process before starting them",
                err=True,
            )
        emit(schemas.master_key_rotated(rotation, key_file=key_file), as_json=as_json)
