"""No query outside a repository: every `select`, `session.exec` or `session.get` of the server
lives in a domain's `repository.py` (or in the kit's database plumbing)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "auth")
# Database plumbing, not queries of a domain: the organisation lock, migrations, the bases.
PLUMBING = {"server/kit/db.py", "server/kit/migrations.py", "server/kit/repository.py"}
QUERY_BUILDERS = {
    "select",
    "update",
    "delete",
    "insert",
    "text",
    "func",
    "and_",
    "or_",
    "col",
    "false",
    "true",
}
SESSION_QUERIES = {"exec", "execute", "get", "scalar", "scalars", "query", "merge"}


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def _is_repository(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return path.name == "repository.py" or relative in PLUMBING


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "sqlalchemy",
            "sqlmodel",
        ):
            builders = sorted(alias.name for alias in node.names if alias.name in QUERY_BUILDERS)
            if builders:
                found.append(f"line {node.lineno}: imports {', '.join(builders)} from {node.module}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SESSION_QUERIES
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "session"
        ):
            found.append(f"line {node.lineno}: session.{node.func.attr}(...)")
    return found


def test_queries_live_only_in_repositories() -> None:
    offenders = {
        path.relative_to(ROOT).as_posix(): violations
        for path in _modules()
        if not _is_repository(path) and (violations := _violations(path))
    }
    assert offenders == {}, "queries outside a repository:\n" + "\n".join(
        f"{module}: {'; '.join(lines)}" for module, lines in offenders.items()
    )


def test_the_scan_sees_a_query_when_there_is_one(tmp_path: Path) -> None:
    module = tmp_path / "service.py"
    module.write_text("from sqlmodel import select\n\ndef f(session):\n    return session.exec(select(1))\n")
    assert _violations(module) == ["line 1: imports select from sqlmodel", "line 4: session.exec(...)"]
