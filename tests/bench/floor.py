"""The MCP floor: a tool that does nothing, served by the same stack as Paywarden's tools.

`floor` takes no arguments, as get_budget does, and answers a one-field result through the same
path: the HTTP server, the bearer check (the token and its agent's standing, one statement), the
MCP SDK's transport and session manager, its validation of the arguments and of the result against
the tool's schemas, the registry's call counter and `ok_result`. What a tool costs above it is
Paywarden's; the floor itself is what every call pays before any tool runs.

The tool is registered only by `create_floor_app`, the factory the benchmarks serve with
(`python -m tests.bench.floor --port N`); no setting of `paywarden serve` reaches it
(tests/mcp/test_floor_tool.py checks that a served Paywarden lists no such tool).
"""

from __future__ import annotations

import argparse
import atexit
import sys
from typing import Annotated

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations
from pydantic import BaseModel
from starlette.applications import Starlette

from auth.scopes import Scope
from server.app import create_app
from server.kit.logs import configure_logging
from server.kit.metrics import process_stopping
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.services import Services
from server.settings import load_settings

NAME = "floor"
FACTORY = "tests.bench.floor:create_floor_app"


class FloorResult(BaseModel):
    ok: bool


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name=NAME,
        title="Nothing",
        description="Do nothing and answer ok (the benchmarks' floor).",
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def floor(ctx: Context) -> Annotated[CallToolResult, FloorResult]:
        try:
            principal_for(ctx, Scope.PAYMENTS_READ)  # what get_budget checks first, in memory
            return ok_result({"ok": True})
        except Exception as exc:
            return to_tool_error(exc, tool=NAME)


def create_floor_app() -> Starlette:
    """`create_app_from_env` with the floor tool added: Paywarden's tools and `floor`."""
    settings = load_settings()
    configure_logging(settings.log_format)
    atexit.register(process_stopping)
    return create_app(settings, extra_tools=(sys.modules[__name__],))


def main() -> None:
    """Serve the floor app as `paywarden serve` serves its own (one worker)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    uvicorn.run(
        FACTORY, factory=True, host=arguments.host, port=arguments.port, log_config=None, proxy_headers=False
    )


if __name__ == "__main__":
    main()
