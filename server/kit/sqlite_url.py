"""Where a `sqlite:///` database URL keeps its file (light: the CLI reads it before loading anything)."""

from __future__ import annotations

from pathlib import Path


def sqlite_file(url: str) -> Path | None:
    """The database file of a `sqlite:///` URL; None for another database or SQLite in memory."""
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return Path(path).resolve()
