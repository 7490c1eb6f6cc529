"""Give a test agent a `cdp` wallet at the CDP stand-in, the way an operator does: the
`paywarden admin wallet connect-cdp` command, the organisation's secrets on its standard input."""

from __future__ import annotations

from typing import Any

from server.kit.db import Database
from server.signers.cdp_credentials import CdpCredentials
from tests.support.cli import CliResult, run_cli


def secrets_text(credentials: CdpCredentials) -> str:
    """The three secrets as standard input: API key id, API key secret, wallet secret."""
    return f"{credentials.api_key_id}\n{credentials.api_key_secret}\n{credentials.wallet_secret}\n"


def connect_cdp(
    db: Database,
    *,
    api_url: str,
    agent: str,
    credentials: CdpCredentials | None,
    args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> CliResult:
    """`connect-cdp --agent AGENT`, the credentials on stdin (None: `--saved-credentials`)."""
    saved = ("--saved-credentials",) if credentials is None else ()
    return run_cli(
        db.url,
        "admin",
        "wallet",
        "connect-cdp",
        "--agent",
        agent,
        *saved,
        *args,
        "--json",
        env={"PAYWARDEN_CDP_API_URL": api_url, **(env or {})},
        input=None if credentials is None else secrets_text(credentials),
    )


def connected(
    db: Database, *, api_url: str, agent: str, credentials: CdpCredentials | None
) -> dict[str, Any]:
    """The connected wallet's document (the command must succeed)."""
    return connect_cdp(db, api_url=api_url, agent=agent, credentials=credentials).json()
