"""fetch_paid and pay_x402 when a payment is held for a person: offer the approval page through the
MCP client, and let the same call pay once the person approved in time.

How the page is offered depends on what the client can do:

- protocol 2025-11-25 (or older) on a stateful session, the client having declared URL-mode
  elicitation: one `elicitation/create` request (`mode: "url"`, the approval URL, a fixed message
  that never carries a seller's words) per call; if the person agrees to open it, the call waits
  up to PAYWARDEN_APPROVAL_WAIT_MS, reading the approval from the database every 2 s (a decision
  made through any process wakes it), then pays, or ends in `approval_denied` /
  `approval_expired`, or, still undecided, returns `pending_approval`; once the approval was
  decided or expired, `notifications/elicitation/complete` tells the client the page is done;
- protocol 2026-07-28 (no sessions, no server-to-client requests), URL elicitation declared: an
  `input_required` result carrying the URL elicitation and a sealed `requestState`
  (server/mcp/approval_state.py); the client's retry with the same arguments and the state
  continues the same purchase, waiting the same way if the person agreed to open the page;
- any other client: the plain `pending_approval` result with `approvalUrl`, to poll
  `get_approval_status` and retry with the idempotency key.

`approvalPrompt` in the pending result says which happened: `not_supported`, `accepted`,
`declined` or `cancelled`. None of these is a decision: only a member on the approval page (or the
break-glass command line) decides.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, Self, TypeVar

import anyio
from mcp.server.mcpserver import Context
from mcp_types import ElicitRequest, ElicitRequestURLParams, InputRequiredResult

from auth.principal import Principal
from server.approvals.service import RETRY_WINDOW
from server.approvals.waiting import wait_for_decision
from server.kit.errors import PaywardenError
from server.mcp.approval_state import ApprovalState, state_expiry
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
from server.payments.inputs import FetchPaidInput, PayX402Input
from server.payments.results import FreeOutcome, PaidOutcome, PendingOutcome, SignedOutcome
from server.vocabulary import ApprovalPrompt, ApprovalStatus

# Fixed words of ours: the page shows what will be paid, so nothing a seller wrote goes here.
PROMPT_MESSAGE = (
    "A payment by your agent needs your approval. Open the Paywarden approval page to see exactly "
    "what would be paid, and approve or deny it there with your passkey."
)


class Purchase(Protocol):
    """A paid call's input: retried, once a person decided, as the purchase its key names."""

    def with_key(self, key: str) -> Self: ...


Q = TypeVar("Q", bound=Purchase)
Out = TypeVar("Out")


@dataclass(frozen=True)
class HeldOutcome:
    """Still waiting for a person when the call ends."""

    pending: PendingOutcome
    prompt: ApprovalPrompt


Outcome = FreeOutcome | PaidOutcome | HeldOutcome | InputRequiredResult
Handover = SignedOutcome | HeldOutcome | InputRequiredResult


class HeldPayments(PageOffers):
    async def fetch_paid(
        self, ctx: Context[Any, Any], principal: Principal, request: FetchPaidInput, arguments: dict[str, Any]
    ) -> Outcome:
        """The purchase, with the approval page offered and waited for when it is held.
        `arguments` are the call's arguments as the client sent them (what a state is bound to)."""
        return await self.call(
            ctx,
            principal,
            request,
            arguments,
            tool="fetch_paid",
            purchase=self._services.purchases.fetch_paid,
        )

    async def pay_x402(
        self, ctx: Context[Any, Any], principal: Principal, given: PayX402Input, arguments: dict[str, Any]
    ) -> Handover:
        """The signed payment handed to the agent, with the approval page offered as for fetch_paid."""
        return await self.call(
            ctx, principal, given, arguments, tool="pay_x402", purchase=self._services.handovers.pay_x402
        )

    async def call(
        self,
        ctx: Context[Any, Any],
        principal: Principal,
        request: Q,
        arguments: dict[str, Any],
        *,
        tool: str,
        purchase: Callable[[Principal, Q], Awaitable[Out | PendingOutcome]],
    ) -> Out | HeldOutcome | InputRequiredResult:
        """`purchase`, offering and waiting for the approval page when it is held."""
        modern = is_modern(ctx)
        if modern and ctx.request_state is not None:
            return await self._continue(ctx, principal, request, arguments, tool=tool, purchase=purchase)
        outcome = await purchase(principal, request)
        if not isinstance(outcome, PendingOutcome):
            return outcome
        if not declares_url_elicitation(ctx):
            return HeldOutcome(outcome, ApprovalPrompt.NOT_SUPPORTED)
        if modern:
            return self._input_required(principal, outcome, arguments, tool=tool)
        # One limit for the whole call: the client's answer to the elicitation, then the wait.
        deadline = anyio.current_time() + self._wait_s
        elicitation_id = secrets.token_urlsafe(16)
        prompt = await ask_to_open(
            ctx,
            message=PROMPT_MESSAGE,
            url=outcome.approval_url,
            elicitation_id=elicitation_id,
            stopping=self._services.stopping,
            limit_s=self._wait_s,
        )
        if prompt == ApprovalPrompt.NOT_SUPPORTED:
            return HeldOutcome(outcome, prompt)
        if self._services.stopping.begun:
            # The process is going away: the pending answer now, for a retry with the key elsewhere.
            return HeldOutcome(outcome, prompt)
        left = deadline - anyio.current_time()
        try:
            result = await self._wait_then_retry(
                ctx, principal, request, outcome, prompt, timeout_s=left, purchase=purchase
            )
        except PaywardenError:
            # Decided or expired, then refused (approval_denied, approval_expired, ...): the
            # page's part is over all the same, and the client may close its prompt.
            await notify_complete(ctx, elicitation_id)
            raise
        if not isinstance(result, HeldOutcome):
            await notify_complete(ctx, elicitation_id)
        return result

    async def _continue(
        self,
        ctx: Context[Any, Any],
        principal: Principal,
        request: Q,
        arguments: dict[str, Any],
        *,
        tool: str,
        purchase: Callable[[Principal, Q], Awaitable[Out | PendingOutcome]],
    ) -> Out | HeldOutcome:
        state = self._sealer.open(
            ctx.request_state,
            principal=principal,
            tool=tool,
            arguments=arguments,
            now=self._services.clock.now(),
        )
        request = request.with_key(state.idempotency_key)
        outcome = await purchase(principal, request)
        if not isinstance(outcome, PendingOutcome):
            return outcome
        prompt = answer_of(ctx)
        return await self._wait_then_retry(
            ctx, principal, request, outcome, prompt, timeout_s=self._wait_s, purchase=purchase
        )

    def _input_required(
        self, principal: Principal, outcome: PendingOutcome, arguments: dict[str, Any], *, tool: str
    ) -> InputRequiredResult:
        approval = outcome.approval
        state = ApprovalState(approval.id, outcome.intent.idempotency_key, INPUT_KEY)
        sealed = self._sealer.seal(
            state,
            principal=principal,
            tool=tool,
            arguments=arguments,
            expires_at=state_expiry(approval.expires_at, RETRY_WINDOW),
        )
        ask = ElicitRequest(params=ElicitRequestURLParams(message=PROMPT_MESSAGE, url=outcome.approval_url))
        return InputRequiredResult(input_requests={INPUT_KEY: ask}, request_state=sealed)

    async def _wait_then_retry(
        self,
        ctx: Context[Any, Any],
        principal: Principal,
        request: Q,
        held: PendingOutcome,
        prompt: ApprovalPrompt,
        *,
        timeout_s: float,
        purchase: Callable[[Principal, Q], Awaitable[Out | PendingOutcome]],
    ) -> Out | HeldOutcome:
        """Wait for the person only if they agreed to open the page; once the approval is decided,
        the retry with the held payment's key pays it or says why not."""
        if prompt != ApprovalPrompt.ACCEPTED or timeout_s <= 0 or self._services.stopping.begun:
            return HeldOutcome(held, prompt)
        # A stopping process answers `pending_approval` now: the agent retries with the key.
        waiting = wait_for_decision(
            self._services.db,
            principal,
            held.approval.id,
            clock=self._services.clock,
            timeout_s=timeout_s,
            interval_s=self._poll_s,
        )
        status = await while_connected(ctx, self._services.stopping, waiting, ApprovalStatus.PENDING)
        if status == ApprovalStatus.PENDING:
            return HeldOutcome(held, prompt)
        outcome = await purchase(principal, request.with_key(held.intent.idempotency_key))
        return HeldOutcome(outcome, prompt) if isinstance(outcome, PendingOutcome) else outcome
