"""The tools' registry: each tool's schemas are built once per process, not once per server.

Building a tool reads its function's signature into pydantic models and JSON schemas, the most
expensive part of starting a server (the app builds two MCP servers, and tests start hundreds).
The signature of a tool's function is fixed by its source, so the built tool is kept per function
and each later server gets a copy bound to its own function (and so to its own services).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver.tools.base import Tool
from mcp_types import ToolAnnotations

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
            "fn": fn,
            "title": title,
            "description": description or template.description,
            "annotations": annotations,
        }
    )


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
