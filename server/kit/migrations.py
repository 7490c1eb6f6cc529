"""Schema migrations: apply them, and tell whether a database is at the newest revision.

alembic is loaded by the functions that use it (a third of a second): a command that only asks
whether a table exists does not pay for it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect

from server.kit.db import Database

if TYPE_CHECKING:
    from alembic.config import Config

_ROOT = Path(__file__).resolve().parents[2]


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "alembic"))
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError("no migrations found")
    return head


def current_revision(db: Database) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(db: Database) -> None:
    """Upgrade to the newest schema in one transaction. Migrations that sign audit events (the one
    that keyed the audit chain) use `db.audit_key`, set once the master key was checked."""
    from alembic import command

    config = alembic_config()
    with db.engine.begin() as conn:
        config.attributes["connection"] = conn
        config.attributes["audit_key"] = db.audit_key
        command.upgrade(config, "head")


def has_table(db: Database, name: str) -> bool:
    with db.engine.connect() as conn:
        return inspect(conn).has_table(name)


def schema_is_current(db: Database) -> bool:
    return current_revision(db) == head_revision()
