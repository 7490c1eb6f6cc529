"""Schema migrations: apply them, and tell whether a database is at the newest revision.

alembic is loaded by the functions that migrate (a hundred modules, a sixth of a second of CPU).
Asking whether the schema is current, what `paywarden serve`, each of its workers and /readyz do,
reads the revisions without it: the newest one from the migration files (each names its
`revision` and `down_revision`), the database's one from alembic's version table."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text

from server.kit.db import Database

if TYPE_CHECKING:
    from alembic.config import Config

_ROOT = Path(__file__).resolve().parents[2]
_VERSIONS = _ROOT / "alembic" / "versions"
_VERSION_TABLE = "alembic_version"  # alembic's default; alembic/env.py keeps it


def alembic_config() -> Config:
    from alembic.config import Config

    config = Config(str(_ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(_ROOT / "alembic"))
    return config


# A migration's own lines `revision: str = "..."` and `down_revision: ... = ...` (alembic's template):
# reading just these is a thousandth of parsing the file (the first migration is the whole schema).
_ASSIGNMENT = re.compile(r"^(revision|down_revision)\s*(?::[^=\n]*)?=\s*(.+?)\s*$", re.MULTILINE)


def _revisions(source: str, path: Path) -> tuple[str, tuple[str, ...]]:
    """A migration file's `revision` and the revisions it follows (`down_revision`)."""
    found: dict[str, object] = {}
    for match in _ASSIGNMENT.finditer(source):
        try:
            found[match[1]] = ast.literal_eval(match[2])
        except (ValueError, SyntaxError) as exc:
            raise RuntimeError(f"{path.name}: {match[1]} is not a literal on one line") from exc
    revision, down = found.get("revision"), found.get("down_revision")
    if not isinstance(revision, str):
        raise RuntimeError(f"{path.name}: no revision")
    follows = (down,) if isinstance(down, str) else tuple(down) if isinstance(down, (tuple, list)) else ()
    return revision, follows


@functools.cache
def head_revision() -> str:
    """The newest revision: the one no other follows. The migration files are this code's own, so
    it is read once per process."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in sorted(_VERSIONS.glob("*.py")):
        revision, follows = _revisions(path.read_text(encoding="utf-8"), path)
        revisions.add(revision)
        followed.update(follows)
    heads = revisions - followed
    if not heads:
        raise RuntimeError("no migrations found")
    if len(heads) > 1:
        raise RuntimeError(f"the migrations have several heads: {', '.join(sorted(heads))}")
    return heads.pop()


def current_revision(db: Database) -> str | None:
    """The revision alembic's version table holds (None for a database never migrated)."""
    with db.engine.connect() as conn:
        if not inspect(conn).has_table(_VERSION_TABLE):
            return None
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(rows) > 1:
        raise RuntimeError(f"the database records several revisions: {', '.join(sorted(rows))}")
    return rows[0] if rows else None


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
