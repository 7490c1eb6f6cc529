"""The tools' registry: each tool's schemas are built once per process, not once per server.

Building a tool reads its function's signature into pydantic models and JSON schemas, the most
expensive part of starting a server (the app builds two MCP servers, and tests start hundreds).
The signature of a tool's function is fixed by its source, so the built tool is kept per function
and each later server gets a copy bound to its own function (and so to its own services), which
counts its calls by outcome (server/kit/metrics.py).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver.tools.base import Tool
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations

from server.kit.metrics import TOOL_CALLS

F = TypeVar("F", bound=Callable[..., Any])

_built: dict[str, Tool] = {}
_lock = threading.Lock()


def _tool(
    fn: Callable[..., Any],
    *,
    name: str,
    title: str | None,
    description: str | None,
    annotations: ToolAnnotations | None,
) -> Tool:
    key = f"{fn.__module__}.{fn.__qualname__}:{name}"
    with _lock:
        template = _built.get(key)
        if template is None:
            template = Tool.from_function(
                fn, name=name, title=title, description=description, annotations=annotations
            )
            _built[key] = template
    return template.model_copy(
        update={
            "fn": _counted(fn, name),
            "title": title,
            "description": description or template.description,
            "annotations": annotations,
        }
    )


def _outcome(result: Any) -> str:
    """`ok`, the error code a tool error carries, or `input_required` (a held call's question)."""
    if isinstance(result, CallToolResult):
        if not result.is_error:
            return "ok"
        error = (result.structured_content or {}).get("error")
        code = error.get("code") if isinstance(error, dict) else None
        return code if isinstance(code, str) else "internal_error"
    if isinstance(result, InputRequiredResult):
        return "input_required"
    return "ok"


def _counted(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    """`fn`, counting each call by its outcome. The tool's schemas were read from `fn` itself:
    the SDK calls this with the arguments it validated against them."""

    @functools.wraps(fn)
    async def call(**arguments: Any) -> Any:
        try:
            result = await fn(**arguments)
        except MCPError:
            TOOL_CALLS.labels(tool=name, outcome="protocol_error").inc()  # e.g. URL elicitation
            raise
        except Exception:
            TOOL_CALLS.labels(tool=name, outcome="internal_error").inc()
            raise
        except BaseException:
            TOOL_CALLS.labels(tool=name, outcome="cancelled").inc()  # the client went away
            raise
        TOOL_CALLS.labels(tool=name, outcome=_outcome(result)).inc()
        return result

    return call


class ToolRegistry:
    """What a tool module registers into (`@registry.tool(...)`); the server is built with the lot."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []

    def tool(
        self,
        *,
        name: str,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
    ) -> Callable[[F], F]:
        def decorator(fn: F) -> F:
            self.tools.append(
                _tool(fn, name=name, title=title, description=description, annotations=annotations)
            )
            return fn

        return decorator
