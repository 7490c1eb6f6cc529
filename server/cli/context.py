"""What every command needs: validated settings, the database, the clock, and who is acting."""

from __future__ import annotations

import getpass
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from server.kit.sqlite_url import sqlite_file

if TYPE_CHECKING:  # loaded when a command runs, never for `--help`
    from auth.principal import Principal
    from server.kit.clock import Clock
    from server.kit.crypto import MasterKey
    from server.kit.db import Database
    from server.settings import Settings
    from server.wallet_policies.sync import CdpReach


@dataclass
class CliContext:
    settings: Settings
    clock: Clock
    creates: bool = False  # only `migrate` and `demo` may create a database or a master key file

    @cached_property
    def _opened(self) -> tuple[Database, MasterKey]:
        from server.kit.db import Database
        from server.wallets.master_key import open_master_key

        self._refuse_missing_database()
        database = Database(self.settings.database_url, pool_size=self.settings.database_pool_size)
        return database, open_master_key(database, self.settings, clock=self.clock, may_create=self.creates)

    def _refuse_missing_database(self) -> None:
        """SQLite makes an empty file for any path it is given: a command run in the wrong directory
        would quietly start a second, empty Paywarden."""
        from server.cli.output import fail

        path = sqlite_file(self.settings.database_url)
        if path is None:
            return
        if not path.parent.is_dir():
            fail(f"no directory {path.parent} for the database {path}; check PAYWARDEN_DATABASE_URL")
        if not self.creates and not path.exists():
            fail(f"no database at {path}; run `paywarden migrate` (or set PAYWARDEN_DATABASE_URL)")

    @property
    def db(self) -> Database:
        """The database, once the master key is known to be its own (MasterKeyError otherwise:
        one line, exit 2): every command that touches it may write the audit log."""
        return self._opened[0]

    @property
    def actor(self) -> str:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return f"cli:{user}"

    @property
    def principal(self) -> Principal:
        """The operator: the command line holds the database's credentials, so it reads every
        organisation; audit events name the account that ran the command."""
        from auth.principal import Principal

        return Principal.operator(self.actor)

    def require_current_schema(self) -> None:
        from server.cli.output import fail
        from server.kit.migrations import schema_is_current

        if not schema_is_current(self.db):
            fail("the database schema is behind: run `paywarden migrate`")

    @property
    def master(self) -> MasterKey:
        """The master key, checked against the database."""
        return self._opened[1]

    @property
    def cdp_reach(self) -> CdpReach:
        """How the command reaches Coinbase CDP for the organisations' `cdp` wallets."""
        from server.wallet_policies.sync import CdpReach

        return CdpReach(
            master=self.master, api_url=self.settings.cdp_api_url, usdc_by_network=self.settings.assets
        )

    def ready(self) -> None:
        """What every command that uses the database does first: the schema must be current and
        the master key must be the database's own."""
        self.require_current_schema()
        _ = self.master


def cli_context(*, exempt: Iterable[str] = (), creates: bool = False) -> CliContext:
    from server.kit.clock import SystemClock
    from server.settings import load_settings

    return CliContext(settings=load_settings(exempt=exempt), clock=SystemClock(), creates=creates)
