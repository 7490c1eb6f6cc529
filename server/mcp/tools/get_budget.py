"""get_budget: what the agent spent today and what its policy still allows. Read-only."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, ToolAnnotations

from auth.principal import Principal
from auth.scopes import Scope
from server.mcp.content import ok_result
from server.mcp.context import principal_for
from server.mcp.errors import to_tool_error
from server.mcp.registry import ToolRegistry
from server.mcp.schemas import budget as schema
from server.mcp.schemas.budget import BudgetResult
from server.payments.budget import budget
from server.payments.wallet_health import NetworkBalance, wallet_balances
from server.services import Services

DESCRIPTION = (
    "Return this agent's budget for today (UTC): spent, daily cap, what remains, the maximum per "
    "payment, the approval threshold, allowed and catalog hosts, network and when the day resets; "
    "what each spending rule of the agent, its team, its person and its organisation leaves "
    "(ruleLimits, scopeLimits, member) and the tightest of them all (effectiveCap); the wallet's "
    "USDC balance on each network (wallet); and warnings: a wallet holding less than one day of "
    "the caps, and money that left the agent's wallet outside any payment Paywarden allowed. Call "
    "it before paying for something."
)


async def _budget_of(services: Services, principal: Principal) -> dict[str, Any]:
    """The budget from the database, then the wallet's balances (at most BALANCE_TIMEOUT_S more)."""
    assert principal.agent_id is not None
    view = await services.db.reading(budget, principal, agent_id=principal.agent_id, now=services.clock.now())
    balances: list[NetworkBalance] = []
    if view.wallet is not None:
        balances = await wallet_balances(
            services.chain,
            services.settings.usdc_address,
            owner=view.wallet.address,
            networks=view.policy.networks,
        )
    return schema.budget(view, balances)


def register(mcp: ToolRegistry, services: Services) -> None:
    @mcp.tool(
        name="get_budget",
        title="Today's budget",
        description=DESCRIPTION,
        annotations=ToolAnnotations(
            read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    )
    async def get_budget(ctx: Context) -> Annotated[CallToolResult, BudgetResult]:
        try:
            principal = principal_for(ctx, Scope.PAYMENTS_READ)
            return ok_result(await _budget_of(services, principal))
        except Exception as exc:
            return to_tool_error(exc, tool="get_budget")
