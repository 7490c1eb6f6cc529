"""`paywarden doctor URL`: why paying a URL would fail, from a terminal, without paying.

It needs no server, no database, no account and no key: it reads only the RPC URLs, the assets,
the timeout and the private-hosts switch, requests the URL once without payment through the safe
seller client and never tells anyone the URL but the seller (and the wallet but its network's
RPC). Exit codes: 0 no problem found, 2 a problem found, 1 it could not run (one line on stderr).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

import anyio
import typer

from server.cli import schemas

if TYPE_CHECKING:
    from server.payments.preflight.diagnosis import Diagnosis

_WALLET = re.compile(r"^0x[0-9a-fA-F]{40}$")
EXIT_NO_PROBLEM = 0
EXIT_COULD_NOT_RUN = 1
EXIT_PROBLEM = 2


def _run(url: str, wallet: str | None, method: str) -> Diagnosis:
    from server.kit.clock import SystemClock
    from server.kit.errors import InputReason, InvalidInput
    from server.payments.inputs import validate_fetch_paid
    from server.payments.preflight.diagnosis import diagnose_without_account
    from server.settings import load_probe_settings

    settings = load_probe_settings()
    if wallet is not None and not _WALLET.match(wallet):
        raise InvalidInput(InputReason.INVALID_WALLET)
    request = validate_fetch_paid(
        {"url": url, "method": method},
        bearer=None,
        public_host="",
        allow_private_hosts=settings.allow_private_hosts,
    )

    async def checks() -> Diagnosis:
        return await diagnose_without_account(settings, request, wallet=wallet, clock=SystemClock())

    return anyio.run(checks)


def _could_not_run(reason: str) -> typer.Exit:
    typer.echo(f"error: doctor could not run: {reason}", err=True)
    return typer.Exit(EXIT_COULD_NOT_RUN)


def doctor(
    url: str = typer.Argument(..., help="The URL a payment fails for."),
    wallet: str | None = typer.Option(
        None, "--wallet", help="The paying wallet's address, to check its balance."
    ),
    method: str = typer.Option("GET", "--method", help="The request's method."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Say why paying URL would fail, and what to do, without paying (no server or key needed)."""
    from server.kit.errors import PaywardenError
    from server.payments.preflight.diagnosis import Status
    from server.settings import ConfigError

    try:
        found = _run(url, wallet, method)
    except ConfigError as exc:
        raise _could_not_run(str(exc)) from None
    except PaywardenError as exc:
        detail = exc.extra.get("reason")
        raise _could_not_run(f"{exc.code}: {exc.describe()}" + (f" ({detail})" if detail else "")) from None
    except Exception as exc:  # never a traceback: one line, and exit 1
        raise _could_not_run(f"unexpected {type(exc).__name__}") from None
    document = schemas.diagnosis(found)
    if as_json:
        typer.echo(json.dumps(document, ensure_ascii=False))
    else:
        typer.echo(schemas.diagnosis_text(document))
    raise typer.Exit(EXIT_PROBLEM if found.status == Status.PROBLEM else EXIT_NO_PROBLEM)
