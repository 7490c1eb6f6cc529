"""request_policy_change: store the request, offer its page to the person through the MCP client,
and let the same call report the decision when the person makes it in time.

As for a held payment (server/mcp/held_payments.py), what the client can do decides how:

- protocol 2025-11-25 on a session, URL elicitation declared: one `elicitation/create` (the
  request's page, fixed words of ours); if the person agrees to open it, the call waits up to
  PAYWARDEN_APPROVAL_WAIT_MS for the decision, reading the request from the database, then sends
  `notifications/elicitation/complete` once it is decided;
- protocol 2026-07-28, URL elicitation declared: an `input_required` result with the URL and a
  sealed `requestState` (server/mcp/approval_state.py) naming the request; the client's retry with
  the same arguments asks for nothing new and, if the person agreed to open the page, waits;
- any other client: the pending request at once, with `manageUrl` to give the user.

Waiting only reads: the decision is a member's, on the page, with a passkey.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestURLParams, InputRequiredResult

from auth.principal import Principal
from server.approvals.policy_changes import RequestView, ask_for_change, manage_url, request_status, view_of
from server.approvals.waiting import wait_for_change_decision
from server.mcp.approval_state import ApprovalState
from server.mcp.elicitation import (
    INPUT_KEY,
    PageOffers,
    answer_of,
    ask_to_open,
    declares_url_elicitation,
    is_modern,
    notify_complete,
    while_connected,
)
from server.policy.requested_changes import RequestedChange
from server.vocabulary import ApprovalPrompt, PolicyChangeStatus

TOOL = "request_policy_change"
# Fixed words of ours: the page shows the change itself; the agent's note is never put here.
PROMPT_MESSAGE = (
    "Your agent asks for a change to its spending policy. Open the Paywarden page to see exactly what "
    "would change, and approve or reject it there with your passkey."
)


@dataclass(frozen=True)
class Asked:
    """The request as the call leaves it, whether this call stored it, and what became of the offer."""

    view: RequestView
    created: bool
    prompt: ApprovalPrompt


class PolicyChangeOffers(PageOffers):
    async def ask_and_offer(
        self,
        ctx: Context[Any, Any],
        principal: Principal,
        change: RequestedChange,
        note: object,
        arguments: dict[str, Any],
    ) -> Asked | InputRequiredResult:
        """Ask for `change`; `arguments` are the call's arguments as sent (what a state is bound to)."""
        services = self._services
        modern = is_modern(ctx)
        if modern and ctx.request_state is not None:
            return await self._resume_asked(ctx, principal, arguments)
        assert principal.agent_id is not None  # an agent's token
        row, created = await services.db.writing(
            ask_for_change,
            principal,
            agent_id=principal.agent_id,
            change=change,
            note=note,
            now=services.clock.now(),
        )
        view = view_of(row, services.clock.now())
        if view.status != PolicyChangeStatus.PENDING or not declares_url_elicitation(ctx):
            return Asked(view, created, ApprovalPrompt.NOT_SUPPORTED)
        if modern:
            return self._page_by_input_required(principal, view, arguments)
        # One limit for the whole call: the client's answer to the elicitation, then the wait.
        deadline = anyio.current_time() + self._wait_s
        elicitation_id = secrets.token_urlsafe(16)
        prompt = await ask_to_open(
            ctx,
            message=PROMPT_MESSAGE,
            url=manage_url(services.settings.public_url, row.id),
            elicitation_id=elicitation_id,
            stopping=services.stopping,
            limit_s=self._wait_s,
        )
        final = await self._wait_for_person(
            ctx, principal, row.id, prompt, timeout_s=deadline - anyio.current_time()
        )
        if final.status != PolicyChangeStatus.PENDING:
            await notify_complete(ctx, elicitation_id)
        return Asked(final, created, prompt)

    async def _resume_asked(
        self, ctx: Context[Any, Any], principal: Principal, arguments: dict[str, Any]
    ) -> Asked:
        state = self._sealer.open(
            ctx.request_state,
            principal=principal,
            tool=TOOL,
            arguments=arguments,
            now=self._services.clock.now(),
        )
        prompt = answer_of(ctx)
        view = await self._wait_for_person(ctx, principal, state.approval_id, prompt, timeout_s=self._wait_s)
        return Asked(view, False, prompt)

    def _page_by_input_required(
        self, principal: Principal, view: RequestView, arguments: dict[str, Any]
    ) -> InputRequiredResult:
        row = view.request
        sealed = self._sealer.seal(
            ApprovalState(row.id, "", INPUT_KEY),
            principal=principal,
            tool=TOOL,
            arguments=arguments,
            expires_at=row.expires_at,
        )
        url = manage_url(self._services.settings.public_url, row.id)
        ask = ElicitRequest(params=ElicitRequestURLParams(message=PROMPT_MESSAGE, url=url))
        return InputRequiredResult(input_requests={INPUT_KEY: ask}, request_state=sealed)

    async def _wait_for_person(
        self,
        ctx: Context[Any, Any],
        principal: Principal,
        request_id: str,
        prompt: ApprovalPrompt,
        *,
        timeout_s: float,
    ) -> RequestView:
        """The request once decided, waiting only if the person agreed to open its page; as it is
        now when the time ran out, the client went away or the process began stopping."""
        services = self._services
        if prompt == ApprovalPrompt.ACCEPTED and timeout_s > 0 and not services.stopping.begun:
            waiting = wait_for_change_decision(
                services.db,
                principal,
                request_id,
                clock=services.clock,
                timeout_s=timeout_s,
                interval_s=self._poll_s,
            )
            await while_connected(ctx, services.stopping, waiting, PolicyChangeStatus.PENDING)
        return await services.db.reading(request_status, principal, request_id, now=services.clock.now())
