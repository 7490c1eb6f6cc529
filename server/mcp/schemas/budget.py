"""get_budget's result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from server.mcp.schemas.common import dollars, timestamp, usd, usd_or_none
from server.models import OutOfPolicyFinding
from server.payments.budget import Budget, CapLevel, Limit, LimitedBy, MemberCap, RuleUse
from server.payments.wallet_health import BalanceUnknown, LowBalance, NetworkBalance, low_balances
from server.vocabulary import FindingKind, RuleScope, RuleSource, RuleWindow


class EffectiveCap(BaseModel):
    limitedBy: LimitedBy
    scope: RuleScope
    capUsd: str
    spentUsd: str
    remainingUsd: str
    resetsAt: str
    ruleId: str | None = None


class RuleLimit(BaseModel):
    ruleId: str
    window: RuleWindow
    limitUsd: str
    spentUsd: str
    remainingUsd: str
    resetsAt: str
    host: str | None
    pathPrefix: str | None
    source: RuleSource


class ScopeLimit(RuleLimit):
    scope: Literal[RuleScope.TEAM, RuleScope.MEMBER, RuleScope.ORG]


class MemberCapResult(BaseModel):
    dailyCapUsd: str | None
    spentTodayUsd: str
    remainingTodayUsd: str
    resetsAt: str


class Warning(BaseModel):
    """Money that left the agent's wallet outside any payment Paywarden allowed."""

    code: Literal["out_of_policy_movement"]
    kind: FindingKind
    network: str
    wallet: str
    txHash: str
    logIndex: int
    blockNumber: int
    counterparty: str | None
    amountUsd: str | None
    nonce: str | None
    intentId: str | None
    detectedAt: str


class LowBalanceWarning(BaseModel):
    """The wallet holds less on a network than one day of the agent's caps."""

    code: Literal["wallet_low_balance"]
    network: str
    wallet: str
    balanceUsd: str
    dayCapUsd: str


class NetworkBalanceResult(BaseModel):
    network: str
    balanceUsd: str | None  # null when the chain did not answer (see reason)
    reason: BalanceUnknown | None


class WalletResult(BaseModel):
    address: str
    balances: list[NetworkBalanceResult]


class OpenCircuit(BaseModel):
    host: str
    failures: int
    openedAt: str
    openUntil: str


class BudgetResult(BaseModel):
    agentId: str
    spentTodayUsd: str
    dailyCapUsd: str
    remainingTodayUsd: str
    maxUsdPerTx: str
    stepUpThresholdUsd: str | None
    allowHosts: list[str]
    catalogHosts: list[str]
    capLevel: CapLevel
    effectiveCap: EffectiveCap
    ruleLimits: list[RuleLimit]
    scopeLimits: list[ScopeLimit] | None = None
    member: MemberCapResult | None
    network: str
    networks: list[str]
    asset: str
    dayResetsAt: str
    policyVersion: int
    wallet: WalletResult | None = None
    warnings: list[Annotated[LowBalanceWarning | Warning, Field(discriminator="code")]] = []
    openCircuits: list[OpenCircuit] = Field(
        default=[], description="Hosts the organisation blocked after paid calls that delivered nothing."
    )


def effective_cap(limit: Limit) -> EffectiveCap:
    cap = EffectiveCap(
        limitedBy=limit.limited_by,
        scope=limit.scope,
        capUsd=usd(limit.cap_atomic),
        spentUsd=usd(limit.spent_atomic),
        remainingUsd=usd(limit.remaining_atomic),
        resetsAt=timestamp(limit.resets_at),
    )
    if limit.rule is not None:
        cap.ruleId = limit.rule.id
    return cap


def _rule_fields(use: RuleUse) -> dict[str, Any]:
    rule = use.rule
    assert rule.window is not None
    return {
        "ruleId": rule.id,
        "window": rule.window,
        "limitUsd": usd(use.limit_atomic),
        "spentUsd": usd(use.spent_atomic),
        "remainingUsd": usd(use.remaining_atomic),
        "resetsAt": timestamp(use.resets_at),
        "host": rule.host,
        "pathPrefix": rule.path_prefix,
        "source": rule.source,
    }


def member_cap(cap: MemberCap) -> MemberCapResult:
    return MemberCapResult(
        dailyCapUsd=None if cap.cap_atomic is None else usd(cap.cap_atomic),
        spentTodayUsd=usd(cap.spent_atomic),
        remainingTodayUsd=usd(cap.remaining_atomic),
        resetsAt=timestamp(cap.resets_at),
    )


def warning(finding: OutOfPolicyFinding) -> Warning:
    return Warning(
        code="out_of_policy_movement",
        kind=finding.kind,
        network=finding.network,
        wallet=finding.wallet_address,
        txHash=finding.tx_hash,
        logIndex=finding.log_index,
        blockNumber=finding.block_number,
        counterparty=finding.counterparty,
        amountUsd=None if finding.amount_atomic is None else usd(finding.amount_atomic),
        nonce=finding.nonce,
        intentId=finding.intent_id,
        detectedAt=timestamp(finding.detected_at),
    )


def low_balance_warning(low: LowBalance, *, wallet: str) -> LowBalanceWarning:
    return LowBalanceWarning(
        code="wallet_low_balance",
        network=low.network,
        wallet=wallet,
        balanceUsd=usd(low.balance_atomic),
        dayCapUsd=usd(low.day_cap_atomic),
    )


def wallet_result(address: str, balances: Sequence[NetworkBalance]) -> WalletResult:
    return WalletResult(
        address=address,
        balances=[
            NetworkBalanceResult(
                network=entry.network,
                balanceUsd=None if entry.balance_atomic is None else usd(entry.balance_atomic),
                reason=entry.reason,
            )
            for entry in balances
        ],
    )


def budget(view: Budget, balances: Sequence[NetworkBalance] = ()) -> dict[str, Any]:
    """The result; `balances`, the wallet's balance per network (none read: no wallet shown)."""
    policy = view.policy
    wallet = view.wallet
    warnings: list[LowBalanceWarning | Warning] = []
    if wallet is not None:
        lows = low_balances(balances, day_cap_atomic=view.day_cap_atomic)
        warnings += [low_balance_warning(low, wallet=wallet.address) for low in lows]
    warnings += [warning(finding) for finding in view.findings]
    result = BudgetResult(
        agentId=view.agent.id,
        spentTodayUsd=usd(view.spent_today_atomic),
        dailyCapUsd=dollars(policy.daily_cap_usd),
        remainingTodayUsd=dollars(view.remaining_today_usd),
        maxUsdPerTx=dollars(policy.max_usd_per_tx),
        stepUpThresholdUsd=usd_or_none(policy.step_up_threshold_usd),
        allowHosts=list(policy.allow_hosts),
        catalogHosts=view.catalog_hosts,
        capLevel=view.cap_level,
        effectiveCap=effective_cap(view.effective),
        ruleLimits=[RuleLimit(**_rule_fields(use)) for use in view.rule_limits],
        member=None if view.member is None else member_cap(view.member),
        network=policy.networks[0],
        networks=list(policy.networks),
        asset="USDC",
        dayResetsAt=timestamp(view.day_resets_at),
        policyVersion=policy.version,
        wallet=None if wallet is None else wallet_result(wallet.address, balances),
        warnings=warnings,
        openCircuits=[
            OpenCircuit(
                host=circuit.host,
                failures=circuit.failures,
                openedAt=timestamp(circuit.opened_at),
                openUntil=timestamp(circuit.open_until),
            )
            for circuit in view.circuits
        ],
    )
    if view.scope_limits:
        result.scopeLimits = [
            ScopeLimit(**_rule_fields(use), scope=use.rule.scope) for use in view.scope_limits
        ]
    return result.model_dump(mode="json", exclude_unset=True)
