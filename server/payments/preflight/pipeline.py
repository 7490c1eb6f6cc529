"""The preflight: everything a paid call checks before it may sign, in one order, run by fetch_paid,
quote_payment and diagnose_payment (and `paywarden doctor`, without an account).

The steps, in the order a call meets them:

1. context: the calling agent, its policy and rules in force, its wallet, the catalog's listing;
2. host: the URL's host against the agent's allowed hosts (nothing is sent when it fails);
3. request: the canonical request and each same-origin redirect, judged by the policy before it is
   sent, within one deadline for the whole exchange; an answer other than 402 ends the preflight;
4. offer: the 402's challenge read, one payable offer chosen, `maxAmountUsd`, the host it names;
5. wallet: a wallet to sign with and, when the network's RPC answers, a balance that covers the price;
6. facts: the purchase as the policy and the ledger see it (and, to pay, time left to send it);
7. decision: the policy's decision with the spend counted now (fetch_paid's also reserves).

A tool chooses what it does with a step that fails (raise its error, answer `would_deny`, report a
cause), never the order or the checks: so a quote or a diagnosis says what fetch_paid would meet.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

import anyio
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session

from auth.principal import Principal
from server.catalog.service import listing_for
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.errors import PaywardenError
from server.kit.metrics import DECISIONS
from server.kit.money import format_usd
from server.kit.networks import network_name as name_of_network
from server.models import Agent, Wallet
from server.payments.circuits import REASON as CIRCUIT_OPEN
from server.payments.circuits import open_circuit
from server.payments.errors import (
    ControlPlaneUnavailable,
    HostNotAllowed,
    InsufficientFunds,
    PolicyDenied,
    WalletNotConfigured,
)
from server.payments.inputs import FetchPaidInput
from server.payments.ledger import PurchaseFacts
from server.payments.location import LocationDenied, judge_for
from server.payments.offer import (
    Offered,
    check_max,
    check_resource,
    choose_offer,
    instruction_like,
    purchase_facts,
    read_challenge,
)
from server.policy.engine import Decision, host_allowed
from server.policy.model import Policy
from server.policy.rulebook import rules_for_agent
from server.policy.rules import Rule
from server.sellers.client import Judge, SellerClient, SellerRequest, SellerResponse
from server.sellers.errors import SellerTimeout
from server.tenancy.service import agent_with_policy
from server.vocabulary import WalletMode
from server.wallets.service import active_wallet
from server.x402.challenge import Challenge
from server.x402.selection import Selection

log = logging.getLogger(__name__)

CIRCUIT_HINT = (
    "This seller took payments without delivering, so the organisation blocks it for 7 days. "
    "Only a member can clear it, on the dashboard."
)
NO_WALLET = "0x0000000000000000000000000000000000000000"


class Step(StrEnum):
    CONTEXT = "context"
    HOST = "host"
    REQUEST = "request"
    OFFER = "offer"
    WALLET = "wallet"
    FACTS = "facts"
    DECISION = "decision"


class StepStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"  # not part of this run: doctor reads no account, a quote needs no wallet
    NOT_NEEDED = "not_needed"  # the seller asked for no payment, so nothing after the request applies
    NOT_REACHED = "not_reached"  # an earlier step failed, or the call was answered before it


@dataclass(frozen=True)
class StepSeen:
    step: Step
    status: StepStatus
    code: str | None = None  # the error code of a failed step


@dataclass(frozen=True)
class AgentContext:
    agent: Agent
    policy: Policy
    wallet: Wallet | None
    listed: bool  # the catalog lists the requested host
    rules: tuple[Rule, ...] = ()  # every rule in force for the agent, to judge each request
    circuit_open: bool = False  # the organisation blocked the host (the seller circuit breaker)

    def judge(self) -> Judge:
        return judge_for(self.policy, self.rules, listed=self.listed)


def load_context(session: Session, principal: Principal, host: str, now: datetime) -> AgentContext:
    """The calling agent, its policy and rules in force, its wallet, and whether the catalog lists
    `host`."""
    assert principal.agent_id is not None
    agent, policy = agent_with_policy(session, principal, principal.agent_id)
    return AgentContext(
        agent,
        policy,
        active_wallet(session, agent),
        listing_for(session, host) is not None,
        tuple(rules_for_agent(session, agent, now=now)),
        open_circuit(session, org_id=agent.org_id, host=host, now=now) is not None,
    )


@dataclass(frozen=True)
class PayingWallet:
    address: str
    mode: WalletMode | None


@dataclass(frozen=True)
class Plan:
    """What one tool brings to the preflight. Without `principal` (doctor) the account's steps are
    skipped; without `decide` the facts and the decision are."""

    principal: Principal | None = None
    wallet: PayingWallet | None = None  # doctor's --wallet; an agent's comes from its context
    wallet_required: bool = True
    read_balance: Callable[[str, Selection], Awaitable[int | None]] | None = None
    decide: Callable[[PurchaseFacts], Awaitable[Decision | None]] | None = None
    # Called once the host passed, before anything is sent; True: the call is already answered.
    before_request: Callable[[AgentContext], Awaitable[bool]] | None = None
    key: str = "preflight-only"
    fingerprint: str = ""
    min_seconds_to_pay: float = 0.0  # fetch_paid: below this much time left, nothing is signed
    counts_decision: bool = False  # fetch_paid: its decision is counted in the metrics, a quote's not
    # pay_x402: the offer step also checks the challenge against the agent's copy (raises its error).
    offer_check: Callable[[Challenge, Selection], None] | None = None


@dataclass
class Passage:
    """What the preflight learnt, step by step, and where it stopped."""

    deadline: float
    seen: dict[Step, StepSeen] = field(default_factory=dict)
    context: AgentContext | None = None
    first: SellerResponse | None = None
    challenge: Challenge | None = None
    selection: Selection | None = None
    offered: Offered | None = None
    wallet: PayingWallet | None = None
    balance_atomic: int | None = None
    facts: PurchaseFacts | None = None
    decision: Decision | None = None
    failed: Step | None = None
    error: PaywardenError | None = None  # the failed step's error, as fetch_paid raises it
    denied: LocationDenied | None = None  # the request step: a request the policy refused to send
    answered: bool = False  # before_request answered the call

    @property
    def payment_asked(self) -> bool:
        return self.first is not None and self.first.status == 402

    def steps(self) -> tuple[StepSeen, ...]:
        rest = (
            StepStatus.NOT_NEEDED
            if self.first is not None and not self.payment_asked
            else StepStatus.NOT_REACHED
        )
        return tuple(self.seen.get(step, StepSeen(step, rest)) for step in Step)

    def mark(self, step: Step, status: StepStatus) -> None:
        self.seen[step] = StepSeen(step, status)


class _Failed(Exception):
    def __init__(self, step: Step, error: PaywardenError) -> None:
        self.step = step
        self.error = error


class Preflight:
    def __init__(
        self,
        *,
        sellers: SellerClient,
        assets: Mapping[str, str],
        timeout_ms: int,
        clock: Clock,
        db: Database | None = None,
    ) -> None:
        self._sellers = sellers
        self._assets = dict(assets)
        self._timeout_ms = timeout_ms
        self._clock = clock
        self._db = db

    async def run(self, request: FetchPaidInput, plan: Plan) -> Passage:
        # One deadline for the whole exchange with the seller: the request, its redirects and the
        # paid request.
        passage = Passage(deadline=anyio.current_time() + self._timeout_ms / 1000)
        try:
            await self._run(request, plan, passage)
        except _Failed as failed:
            passage.failed, passage.error = failed.step, failed.error
            passage.seen[failed.step] = StepSeen(failed.step, StepStatus.FAILED, failed.error.code)
        if passage.denied is not None and plan.counts_decision:
            _count_decision(passage.denied.decision)  # a redirect the policy refused
        return passage

    async def _run(self, request: FetchPaidInput, plan: Plan, passage: Passage) -> None:
        context = await self._context(request, plan, passage)
        if context is not None:
            if not host_allowed(context.policy, request.host, listed=context.listed):
                raise _Failed(Step.HOST, HostNotAllowed(host=request.host))
            if context.circuit_open:
                raise _Failed(Step.HOST, circuit_open(context.policy))
            passage.mark(Step.HOST, StepStatus.PASSED)
            if plan.before_request is not None and await plan.before_request(context):
                passage.answered = True
                return
        else:
            passage.mark(Step.HOST, StepStatus.SKIPPED)

        passage.first = first = await self._request(request, context, passage)
        passage.mark(Step.REQUEST, StepStatus.PASSED)
        if first.status != 402:
            return

        networks = context.policy.networks if context is not None else ()
        passage.offered = self._offer(request, first, networks, passage, plan.offer_check)
        passage.mark(Step.OFFER, StepStatus.PASSED)

        await self._wallet(plan, passage)

        if plan.decide is None:
            passage.mark(Step.FACTS, StepStatus.SKIPPED)
            passage.mark(Step.DECISION, StepStatus.SKIPPED)
            return
        if plan.min_seconds_to_pay > 0 and passage.deadline - anyio.current_time() < plan.min_seconds_to_pay:
            raise _Failed(Step.FACTS, SellerTimeout())
        wallet = passage.wallet
        passage.facts = facts = purchase_facts(
            request,
            first,
            passage.offered,
            key=plan.key,
            fingerprint=plan.fingerprint,
            payer=wallet.address if wallet else NO_WALLET,
            wallet_mode=wallet.mode if wallet else None,
        )
        passage.mark(Step.FACTS, StepStatus.PASSED)

        passage.decision = decision = await plan.decide(facts)
        if decision is not None and plan.counts_decision:
            _count_decision(decision)
        if decision is not None and decision.outcome == "deny":
            raise _Failed(Step.DECISION, PolicyDenied.of(decision))
        passage.mark(Step.DECISION, StepStatus.PASSED)

    async def _context(self, request: FetchPaidInput, plan: Plan, passage: Passage) -> AgentContext | None:
        if plan.principal is None:
            passage.mark(Step.CONTEXT, StepStatus.SKIPPED)
            passage.wallet = plan.wallet
            return None
        assert self._db is not None
        try:
            context = await self._db.reading(load_context, plan.principal, request.host, self._clock.now())
        except SQLAlchemyError as exc:
            log.exception("could not load the agent's policy")
            raise ControlPlaneUnavailable() from exc
        passage.context = context
        wallet = context.wallet
        passage.wallet = PayingWallet(wallet.address, wallet.mode) if wallet else None
        passage.mark(Step.CONTEXT, StepStatus.PASSED)
        return context

    async def _request(
        self, request: FetchPaidInput, context: AgentContext | None, passage: Passage
    ) -> SellerResponse:
        try:
            return await self._sellers.fetch(
                SellerRequest(request.method, request.url, request.headers, request.body),
                deadline=passage.deadline,
                judge=context.judge() if context is not None else None,
            )
        except LocationDenied as denied:
            passage.denied = denied
            raise _Failed(Step.REQUEST, PolicyDenied.of(denied.decision)) from None
        except PaywardenError as exc:  # unreachable, too slow, too large, blocked
            raise _Failed(Step.REQUEST, exc) from None

    def _offer(
        self,
        request: FetchPaidInput,
        first: SellerResponse,
        networks: tuple[str, ...],
        passage: Passage,
        offer_check: Callable[[Challenge, Selection], None] | None,
    ) -> Offered:
        try:
            passage.challenge = challenge = read_challenge(first)
            passage.selection = selection = choose_offer(challenge, self._assets, networks)
            check_max(selection.amount_atomic, request.max_amount_usd)
            resource_host = check_resource(request.host, challenge, selection)
            if offer_check is not None:
                offer_check(challenge, selection)
        except PaywardenError as exc:
            raise _Failed(Step.OFFER, exc) from None
        return Offered(challenge, selection, resource_host, instruction_like(challenge, first))

    async def _wallet(self, plan: Plan, passage: Passage) -> None:
        wallet, selection = passage.wallet, passage.selection
        assert selection is not None
        if wallet is None:
            if plan.wallet_required:
                raise _Failed(Step.WALLET, WalletNotConfigured())
            passage.mark(Step.WALLET, StepStatus.SKIPPED)
            return
        if plan.read_balance is not None:
            passage.balance_atomic = balance = await plan.read_balance(wallet.address, selection)
            # Advisory: the balance can change before the seller settles, and an RPC that does not
            # answer skips the check; the seller's facilitator has the last word either way.
            if balance is not None and balance < selection.amount_atomic:
                raise _Failed(Step.WALLET, insufficient_funds(wallet.address, selection, balance))
        passage.mark(Step.WALLET, StepStatus.PASSED)


def circuit_open(policy: Policy) -> PolicyDenied:
    return PolicyDenied(reasons=[CIRCUIT_OPEN], policyVersion=policy.version, hint=CIRCUIT_HINT)


def _count_decision(decision: Decision) -> None:
    """One decision, by outcome and its first reason (a closed set: never a host or an amount)."""
    if decision.outcome == "deny" and decision.reasons:
        reason = str(decision.reasons[0])
    elif decision.outcome == "hold" and decision.hold_reason is not None:
        reason = str(decision.hold_reason)
    else:
        reason = "none"
    DECISIONS.labels(outcome=decision.outcome, reason=reason).inc()


def insufficient_funds(address: str, selection: Selection, balance: int) -> InsufficientFunds:
    network_name = name_of_network(selection.network)
    have = format_usd(balance, atomic=True)
    need = format_usd(selection.amount_atomic, atomic=True)
    short = f"{address[:6]}…{address[-4:]}"
    return InsufficientFunds(
        summary=(
            f"Wallet {short} holds {have} USDC on {network_name}, and this payment needs {need} USDC. "
            "Nothing was signed or paid."
        ),
        payer=address,
        network=selection.network,
        networkName=network_name,
        balanceUsdc=have,
        amountUsdc=need,
    )
