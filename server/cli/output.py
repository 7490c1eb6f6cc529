"""How commands speak: one JSON object with --json, short lines otherwise, errors as one line."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import typer

from server.kit.crypto import MasterKeyError
from server.kit.errors import PaywardenError
from server.policy.model import PolicyError
from server.settings import ConfigError

JSON = typer.Option(False, "--json", help="Print one JSON object.")


def emit(
    data: dict[str, Any], *, as_json: bool, human: Callable[[dict[str, Any]], str] | None = None
) -> None:
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, default=str))
    else:
        typer.echo(human(data) if human else "\n".join(f"{k}: {v}" for k, v in data.items()))


def fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn expected errors into one line on stderr and a non-zero exit code."""
    try:
        yield
    except (ConfigError, MasterKeyError) as exc:
        fail(str(exc), 2)
    except PaywardenError as exc:
        detail = exc.extra.get("reason")
        fail(f"{exc.code}: {exc.message}" + (f" ({detail})" if detail else ""))
    except PolicyError as exc:
        fail(f"invalid_input: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)
