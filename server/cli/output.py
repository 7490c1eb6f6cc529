"""How commands speak: one JSON object with --json, short lines otherwise, errors as one line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

JSON = typer.Option(False, "--json", help="Print one JSON object.")


def command_group(help: str, *, example: str, **options: Any) -> typer.Typer:
    """A group of commands whose `--help` ends with one example. Help is plain text: rendering it
    with rich would cost a newcomer's every `--help` more than loading the commands does."""
    return typer.Typer(
        help=help,
        epilog=f"\b\nExample:\n  {example}",
        no_args_is_help=True,
        rich_markup_mode=None,
        **options,
    )


def emit(
    data: dict[str, Any], *, as_json: bool, human: Callable[[dict[str, Any]], str] | None = None
) -> None:
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, default=str))
    else:
        typer.echo(human(data) if human else human_text(data))


def human_text(document: dict[str, Any], indent: str = "") -> str:
    """A document as a person reads it: aligned `label  value` lines, lists of scalars joined by
    commas, nested objects indented under their label, lists of objects as tables."""
    if not document:
        return f"{indent}(nothing)"
    width = max(len(_label(key)) for key in document)
    lines: list[str] = []
    for key, value in document.items():
        label = _label(key)
        if isinstance(value, dict) and value:
            lines += [f"{indent}{label}", human_text(value, indent + "  ")]
        elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
            lines += [f"{indent}{label}", table(value, indent + "  ")]
        else:
            lines.append(f"{indent}{label.ljust(width)}  {_scalar(value)}")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]], indent: str = "") -> str:
    """Rows as aligned columns under a header of their keys."""
    keys = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_label(key) for key in keys]] + [[_scalar(row.get(key)) for key in keys] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(keys))]
    return "\n".join(
        indent + "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    )


def _label(key: str) -> str:
    """camelCase as words: `stepUpThresholdUsd` reads `step up threshold (USD)`."""
    words = "".join(f" {c.lower()}" if c.isupper() else c for c in key).split()
    return " ".join(_WORDS.get(word, word) for word in words)


_WORDS = {"usd": "(USD)", "url": "URL", "mcp": "MCP", "ttl": "TTL"}


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ", ".join(_scalar(item) for item in value) if value else "(none)"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn expected errors into one line on stderr and a non-zero exit code.

    The error classes are imported only once something went wrong: by then the command has loaded
    their modules, and `--help` stays free of them."""
    try:
        yield
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        line, code = _one_line(exc)
        if line is None:
            raise
        fail(line, code)


def _one_line(exc: Exception) -> tuple[str | None, int]:
    from sqlalchemy.exc import DBAPIError

    from server.kit.crypto import MasterKeyError
    from server.kit.errors import PaywardenError
    from server.policy.model import PolicyError
    from server.settings import ConfigError

    if isinstance(exc, ConfigError | MasterKeyError):
        return str(exc), 2
    if isinstance(exc, PaywardenError):
        detail = exc.extra.get("reason")
        return f"{exc.code}: {exc.describe()}" + (f" ({detail})" if detail else ""), 1
    if isinstance(exc, PolicyError):
        return f"invalid_input: {exc}", 1
    if isinstance(exc, DBAPIError):
        return f"cannot use the database: {_first_line(exc.orig)}; check PAYWARDEN_DATABASE_URL", 1
    return None, 1


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip() if error is not None else ""
    return text.splitlines()[0] if text else "no reason given"
