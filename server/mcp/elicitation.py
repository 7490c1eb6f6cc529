"""Offering a page to the person through the MCP client (URL elicitation), shared by the tools that
wait for a person: fetch_paid's held payments (server/mcp/held_payments.py) and policy change
requests (server/mcp/policy_change_offers.py).

What the client can do decides how: a request at 2026-07-28 (no sessions) is answered with an
`input_required` result the client retries; at 2025-11-25 on a session the call sends one
`elicitation/create` and may wait; any other client is given the link. The person's answer
(`accept`, `decline`, `cancel`) is never a decision: it only says whether they agreed to open the
page.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from server.kit.stopping import Stopping
from server.mcp.approval_state import ApprovalStateSealer
from server.mcp.endpoint import DISCONNECTED_KEY
from server.services import Services
from server.vocabulary import ApprovalPrompt

INPUT_KEY = "approval"
T = TypeVar("T")
ANSWERS = {
    "accept": ApprovalPrompt.ACCEPTED,
    "decline": ApprovalPrompt.DECLINED,
    "cancel": ApprovalPrompt.CANCELLED,
}


class PageOffers:
    """What a tool that offers a page to the person and may wait for its decision holds: the
    services, the sealer of its 2026-07-28 `requestState` (one key every process derives), and
    how long and how often it waits (PAYWARDEN_APPROVAL_WAIT_MS, PAYWARDEN_APPROVAL_POLL_MS)."""

    def __init__(self, services: Services) -> None:
        self._services = services
        self._sealer = ApprovalStateSealer(services.settings.master.derive("paywarden mcp approval state"))
        self._wait_s = services.settings.approval_wait_ms / 1000
        self._poll_s = services.settings.approval_poll_ms / 1000


def is_modern(ctx: Context[Any, Any]) -> bool:
    """A request at a protocol without sessions (2026-07-28 and later)."""
    version = ctx.protocol_version
    return version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS


def declares_url_elicitation(ctx: Context[Any, Any]) -> bool:
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and elicitation.url is not None


async def first_of(work: Awaitable[T], stopping: Stopping) -> T | None:
    """`work`'s result, or None once the process is stopping (`work` is then cancelled)."""
    result: list[T] = []
    async with anyio.create_task_group() as group:

        async def run() -> None:
            result.append(await work)
            group.cancel_scope.cancel()

        async def stop() -> None:
            await stopping.wait()
            group.cancel_scope.cancel()

        group.start_soon(run)
        group.start_soon(stop)
    return result[0] if result else None


async def ask_to_open(
    ctx: Context[Any, Any], *, message: str, url: str, elicitation_id: str, stopping: Stopping, limit_s: float
) -> ApprovalPrompt:
    """Send one URL elicitation (2025-11-25) and read the person's answer within `limit_s`: no
    answer in time, or a process that began stopping, counts as dismissed (`cancelled`); a client
    without a back channel, or one that answered with an error, could not ask (`not_supported`)."""
    prompt = ApprovalPrompt.CANCELLED
    try:
        with anyio.move_on_after(max(limit_s, 1.0)):
            answer = await first_of(ctx.elicit_url(message, url, elicitation_id), stopping)
            if answer is not None:
                prompt = ANSWERS.get(answer.action, ApprovalPrompt.CANCELLED)
    except MCPError:
        return ApprovalPrompt.NOT_SUPPORTED
    return prompt


async def while_connected(ctx: Context[Any, Any], stopping: Stopping, work: Awaitable[T], otherwise: T) -> T:
    """`work`'s result, or `otherwise` once the client's connection of this call went away or the
    process began stopping (`work` is then cancelled)."""
    result: list[T] = []
    gone = disconnection(ctx)
    async with anyio.create_task_group() as group:

        async def stop_on(event: anyio.Event | Stopping) -> None:
            await event.wait()
            group.cancel_scope.cancel()

        if gone is not None:
            group.start_soon(stop_on, gone)
        group.start_soon(stop_on, stopping)
        result.append(await work)
        group.cancel_scope.cancel()
    return result[0] if result else otherwise


def answer_of(ctx: Context[Any, Any]) -> ApprovalPrompt:
    """The client's answer to the elicitation in a 2026-07-28 retry; none means it could not ask."""
    answer = (ctx.input_responses or {}).get(INPUT_KEY)
    if isinstance(answer, ElicitResult):
        return ANSWERS.get(answer.action, ApprovalPrompt.CANCELLED)
    return ApprovalPrompt.NOT_SUPPORTED


def disconnection(ctx: Context[Any, Any]) -> anyio.Event | None:
    """Set when the client's connection of this call went away."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    event = scope.get(DISCONNECTED_KEY) if isinstance(scope, dict) else None
    return event if isinstance(event, anyio.Event) else None


async def notify_complete(ctx: Context[Any, Any], elicitation_id: str) -> None:
    """Tell the client the page's interaction is over (2025-11-25); best effort."""
    try:
        await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)
    except Exception:  # a notification the client may not want never fails the call
        return
