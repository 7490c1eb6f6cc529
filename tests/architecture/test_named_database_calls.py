"""Every call into the database names the service it runs: `db.run`, `db.reading` and
`db.writing` are given a module-level function or a method, never a function defined on the spot
(a nested `def` or a lambda), so a reader and `grep` can follow the call graph from an entry point
to the service it calls."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "auth")
DATABASE_CALLS = frozenset({"run", "reading", "writing"})
# `anyio.run(main)` starts an event loop, it is not database work.
EVENT_LOOPS = frozenset({"anyio", "asyncio"})


def _modules() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def _local_functions(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names of the functions defined inside `function` (at any depth)."""
    return {
        node.name
        for node in ast.walk(function)
        if node is not function and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def unnamed_database_calls(source: str) -> list[int]:
    """The lines where a locally defined function or a lambda is handed to the database."""
    tree = ast.parse(source)
    found: list[int] = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        local = _local_functions(function)
        for node in ast.walk(function):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in DATABASE_CALLS
                and not (isinstance(node.func.value, ast.Name) and node.func.value.id in EVENT_LOOPS)
                and node.args
            ):
                continue
            given = node.args[0]
            if isinstance(given, ast.Lambda) or (isinstance(given, ast.Name) and given.id in local):
                found.append(node.lineno)
    return sorted(set(found))


def test_the_check_sees_a_closure_and_a_lambda() -> None:
    source = (
        "async def handler(db):\n"
        "    def read():\n"
        "        return 1\n"
        "    await db.run(read)\n"
        "    await db.reading(lambda session: 2)\n"
        "    await db.writing(save_org, 3)\n"
        "    async def main():\n"
        "        return 4\n"
        "    anyio.run(main)\n"
    )
    assert unnamed_database_calls(source) == [4, 5]


def test_no_database_call_is_given_a_function_defined_on_the_spot() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in _modules()
        for line in unnamed_database_calls(path.read_text())
    ]
    assert offenders == []
