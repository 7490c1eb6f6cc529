"""diagnose_payment and `paywarden doctor`: why would paying this URL fail, without paying it.

The diagnosis runs fetch_paid's own preflight (preflight.py), which requests the URL once, without
a payment, through the safe seller client; the cause reported is the first step that fails, so it
is the first error a real attempt would hit, and `steps` lists every step as the preflight saw it:

1. the host against the agent's allowed hosts (the tool only; nothing is sent when it fails);
2. the request: unreachable, too slow, redirected to another origin, an error instead of a 402;
3. the 402's challenge (read as fetch_paid reads it), a payable offer, `maxAmountUsd`, the host
   the challenge asks to be paid for;
4. the wallet: the agent's (the tool) or `--wallet` (doctor), and its USDC balance from the
   network's RPC when one is configured;
5. the agent's policy, rules and caps with the spend counted now (the tool only).

Warnings never block a payment: no wallet known, balance not checked, instruction-like text in the
402, offers on mainnet and testnet at once, an x402 version that disagrees with the challenge's
shape, some offers unpayable. Nothing the seller wrote comes back: its description and error are
dropped, and any field of its offers that is not a simple token reads `[unreadable]` (see
reading.py; the sentences and the issue report are report.py's).

It never signs, reserves or records anything. `doctor` needs no database, account or key: only
the RPC URLs, the assets, the timeout and the private-hosts switch (ProbeSettings).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from urllib.parse import urlsplit

from sqlmodel import Session

from auth.principal import Principal
from server.chain.service import ChainService
from server.kit.clock import Clock
from server.kit.db import Database
from server.payments import ledger
from server.payments.errors import PolicyDenied
from server.payments.fingerprint import request_fingerprint
from server.payments.inputs import FetchPaidInput
from server.payments.preflight.pipeline import Passage, PayingWallet, Plan, Preflight, Step, StepSeen
from server.payments.preflight.reading import (
    AcceptSeen,
    ChallengeProblem,
    RawChallenge,
    accepts_seen,
    kind_of_network,
    public_url,
    read_raw,
    resource_host_seen,
)
from server.payments.usage import context_for
from server.policy.engine import Decision
from server.policy.windows import window_end
from server.sellers.client import SellerClient, SellerResponse
from server.settings import ProbeSettings, Settings
from server.tenancy.service import get_agent
from server.vocabulary import HoldReason, RuleKind, RuleScope, RuleSource, RuleWindow
from server.x402.challenge import Challenge
from server.x402.instructions import challenge_reads_like_instructions
from server.x402.selection import Selection

DOCTOR_MAX_RESPONSE_BYTES = 1_048_576


class Status(StrEnum):
    PROBLEM = "problem"
    NO_PROBLEM_FOUND = "no_problem_found"


class Cause(StrEnum):
    """The first thing a real fetch_paid would trip over, in the order it meets them."""

    HOST_NOT_ALLOWED = "host_not_allowed"
    SELLER_UNREACHABLE = "seller_unreachable"
    SELLER_TIMEOUT = "seller_timeout"
    REDIRECT_NOT_FOLLOWED = "redirect_not_followed"
    SELLER_ERROR = "seller_error"  # an error status instead of a 402
    INVALID_PAYMENT_REQUIRED = "invalid_payment_required"
    NO_PAYABLE_ENTRY = "no_payable_entry"
    AMOUNT_EXCEEDS_MAX = "amount_exceeds_max"
    RESOURCE_MISMATCH = "resource_mismatch"
    WALLET_NOT_CONFIGURED = "wallet_not_configured"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    POLICY_DENIED = "policy_denied"

    @property
    def fetch_paid_error(self) -> str | None:
        """The error code fetch_paid would return (None: it would return an answer, unpaid)."""
        if self in (Cause.REDIRECT_NOT_FOLLOWED, Cause.SELLER_ERROR):
            return None
        return str(self)


class WarningCode(StrEnum):
    """Something worth knowing that never blocks a payment."""

    NO_WALLET = "no_wallet"
    BALANCE_NOT_CHECKED = "balance_not_checked"
    INSTRUCTION_LIKE_TEXT = "instruction_like_text"
    MIXED_MAINNET_TESTNET = "mixed_mainnet_testnet"
    X402_VERSION_MISMATCH = "x402_version_mismatch"
    SOME_ENTRIES_UNPAYABLE = "some_entries_unpayable"


class WalletSource(StrEnum):
    ARGUMENT = "argument"  # doctor --wallet
    AGENT = "agent"  # the agent's registered wallet


@dataclass(frozen=True)
class RequestSeen:
    method: str
    url: str  # without its query string
    http_status: int | None
    x402_version: int | None


@dataclass(frozen=True)
class WalletSeen:
    address: str
    source: WalletSource
    network: str | None = None
    balance_atomic: int | None = None
    needed_atomic: int | None = None
    rpc_host: str | None = None


@dataclass(frozen=True)
class RuleBlock:
    """A limit rule that would refuse this payment now: it leaves less than the price."""

    rule_id: str
    scope: RuleScope
    window: RuleWindow | None
    limit_atomic: int
    remaining_atomic: int
    resets_at: datetime | None


@dataclass(frozen=True)
class ChatRuleSeen:
    """A rule the agent proposed from the chat that blocks or limits payments to this host."""

    rule_id: str
    kind: RuleKind
    host: str | None
    path_prefix: str | None
    limit_atomic: int | None
    window: RuleWindow | None
    expires_at: datetime | None


@dataclass(frozen=True)
class PolicyView:
    decision: Decision
    rule_blocks: tuple[RuleBlock, ...] = ()
    chat_rules: tuple[ChatRuleSeen, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    status: Status
    cause: Cause | None
    reasons: tuple[str, ...]
    warnings: tuple[WarningCode, ...]
    request: RequestSeen
    host: str
    resource_host: str | None
    accepts: tuple[AcceptSeen, ...]
    wallet: WalletSeen | None
    chat_rules: tuple[ChatRuleSeen, ...]
    rule_blocks: tuple[RuleBlock, ...]
    checked_at: datetime
    steps: tuple[StepSeen, ...] = ()  # the preflight's steps, as fetch_paid would meet them
    selection_network: str | None = None
    amount_atomic: int | None = None
    max_amount: str | None = None
    hold_reason: HoldReason | None = None
    policy_read: bool = False  # the agent's policy was consulted (the tool); doctor reads none
    timeout_ms: int = 0


@dataclass
class _Findings:
    """What the diagnosis reads off the preflight's passage, filled in as it goes."""

    request: RequestSeen
    warnings: list[WarningCode] = field(default_factory=list)
    accepts: tuple[AcceptSeen, ...] = ()
    resource_host: str | None = None
    wallet: WalletSeen | None = None
    selection: Selection | None = None
    view: PolicyView | None = None

    def warn(self, warning: WarningCode) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)


PolicyReader = Callable[[ledger.PurchaseFacts], Awaitable[PolicyView]]

# The preflight's failures a diagnosis names as its cause (any other error is raised, as before).
_CAUSE_OF_ERROR = {str(cause): cause for cause in Cause}


# -- reading the preflight ------------------------------------------------------------------------


class Diagnoser:
    """Runs the preflight for one URL and says what it met. Shared by the tool (with the agent's
    account and policy) and doctor (with neither)."""

    def __init__(
        self,
        *,
        sellers: SellerClient,
        chain: ChainService,
        assets: Mapping[str, str],
        rpc_urls: Mapping[str, str],
        timeout_ms: int,
        clock: Clock,
        db: Database | None = None,
    ) -> None:
        self._chain = chain
        self._assets = dict(assets)
        self._rpc_urls = dict(rpc_urls)
        self._timeout_ms = timeout_ms
        self._clock = clock
        self._preflight = Preflight(sellers=sellers, assets=assets, timeout_ms=timeout_ms, clock=clock, db=db)

    async def run(
        self,
        request: FetchPaidInput,
        *,
        principal: Principal | None = None,
        wallet: str | None = None,
        policy: PolicyReader | None = None,
    ) -> Diagnosis:
        """With `principal`: the agent's account, wallet and (with `policy`) decision; without it,
        doctor's checks: the seller, the challenge and `wallet`'s balance."""
        found = _Findings(RequestSeen(request.method, public_url(request.url), None, None))

        async def decide(facts: ledger.PurchaseFacts) -> Decision:
            assert policy is not None
            found.view = await policy(facts)
            return found.view.decision

        plan = Plan(
            principal=principal,
            wallet=PayingWallet(wallet, None) if wallet else None,
            wallet_required=principal is not None,
            read_balance=self._read_balance,
            decide=decide if policy is not None else None,
            key="diagnosis-only",
            fingerprint=request_fingerprint(request),
        )
        source = WalletSource.AGENT if principal is not None else WalletSource.ARGUMENT
        if wallet is None and principal is None:
            found.warn(WarningCode.NO_WALLET)
        passage = await self._preflight.run(request, plan)
        if passage.wallet is not None:
            found.wallet = WalletSeen(passage.wallet.address, source)
        cause, reasons = self._read(request, passage, found)
        return self._result(request, passage, found, cause, reasons, policy_read=policy is not None)

    def _read(
        self, request: FetchPaidInput, passage: Passage, found: _Findings
    ) -> tuple[Cause | None, tuple[str, ...]]:
        """The cause and its reasons: the first step that failed, as the diagnosis names it."""
        error = passage.error
        if passage.failed == Step.HOST:
            if isinstance(error, PolicyDenied):  # the organisation blocked the host (its seller circuit)
                return Cause.POLICY_DENIED, tuple(str(reason) for reason in error.extra.get("reasons", ()))
            return Cause.HOST_NOT_ALLOWED, ()
        if passage.denied is not None:
            return Cause.POLICY_DENIED, tuple(str(reason) for reason in passage.denied.decision.reasons)
        if passage.failed == Step.REQUEST:
            assert error is not None
            if error.code not in (Cause.SELLER_UNREACHABLE, Cause.SELLER_TIMEOUT):
                raise error
            return _CAUSE_OF_ERROR[error.code], ()

        first = passage.first
        assert first is not None
        raw = read_raw(first) if first.status == 402 else None
        found.request = RequestSeen(
            request.method, public_url(request.url), first.status, raw.version if raw else None
        )
        if first.redirect_not_followed:
            return Cause.REDIRECT_NOT_FOLLOWED, ()
        if raw is None:
            return (Cause.SELLER_ERROR if first.status >= 400 else None), ()

        challenge = passage.challenge
        version = challenge.x402_version if challenge else (raw.version if raw.version in (1, 2) else 2)
        found.accepts = accepts_seen(
            raw.offers if challenge is None else [o.raw for o in challenge.offers], version, self._assets
        )
        found.resource_host = resource_host_seen(challenge, raw)
        self._warn_about_challenge(found, first, challenge, raw)
        found.selection = passage.selection
        if passage.seen.get(Step.WALLET) is not None and passage.wallet is not None:
            found.wallet = self._wallet_seen(found, passage)

        if error is None:
            return None, ()
        cause = _CAUSE_OF_ERROR.get(error.code)
        if cause is None:
            raise error
        if cause == Cause.INVALID_PAYMENT_REQUIRED:
            problems = raw.problems or (ChallengeProblem.NO_CHALLENGE,)
            return cause, tuple(str(problem) for problem in problems)
        if cause == Cause.NO_PAYABLE_ENTRY:
            return cause, (str(error.extra["reason"]),)
        if cause == Cause.POLICY_DENIED:
            assert passage.decision is not None
            return cause, passage.decision.reasons
        return cause, ()

    def _result(
        self,
        request: FetchPaidInput,
        passage: Passage,
        found: _Findings,
        cause: Cause | None,
        reasons: tuple[str, ...],
        *,
        policy_read: bool,
    ) -> Diagnosis:
        view = found.view
        rule_blocks = view.rule_blocks if view else ()
        problem = cause is not None or bool(rule_blocks)
        selection = found.selection
        max_amount = request.max_amount_usd
        return Diagnosis(
            status=Status.PROBLEM if problem else Status.NO_PROBLEM_FOUND,
            cause=cause,
            reasons=reasons,
            warnings=tuple(found.warnings),
            request=found.request,
            host=request.host,
            resource_host=found.resource_host,
            accepts=found.accepts,
            wallet=found.wallet,
            chat_rules=view.chat_rules if view else (),
            rule_blocks=rule_blocks,
            checked_at=self._clock.now(),
            steps=passage.steps(),
            selection_network=selection.network if selection else None,
            amount_atomic=selection.amount_atomic if selection else None,
            max_amount=None if max_amount is None else str(max_amount),
            hold_reason=view.decision.hold_reason if view and view.decision.outcome == "hold" else None,
            policy_read=policy_read,
            timeout_ms=self._timeout_ms,
        )

    def _warn_about_challenge(
        self, found: _Findings, first: SellerResponse, challenge: Challenge | None, raw: RawChallenge
    ) -> None:
        texts = challenge.seller_texts() if challenge is not None else []
        if challenge_reads_like_instructions(texts, first.body, first.content_type):
            found.warn(WarningCode.INSTRUCTION_LIKE_TEXT)
        kinds = {kind_of_network(offer.get("network")) for offer in raw.offers}
        if {"mainnet", "testnet"} <= kinds:
            found.warn(WarningCode.MIXED_MAINNET_TESTNET)
        if raw.mismatch:
            found.warn(WarningCode.X402_VERSION_MISMATCH)
        payable = [accept.payable for accept in found.accepts]
        if any(payable) and not all(payable):
            found.warn(WarningCode.SOME_ENTRIES_UNPAYABLE)

    async def _read_balance(self, owner: str, selection: Selection) -> int | None:
        return await self._chain.balance(network=selection.network, asset=selection.asset, owner=owner)

    def _wallet_seen(self, found: _Findings, passage: Passage) -> WalletSeen:
        assert found.wallet is not None
        assert passage.selection is not None
        selection = passage.selection
        rpc = self._rpc_urls.get(selection.network)
        if passage.balance_atomic is None:
            found.warn(WarningCode.BALANCE_NOT_CHECKED)
        return WalletSeen(
            address=found.wallet.address,
            source=found.wallet.source,
            network=selection.network,
            balance_atomic=passage.balance_atomic,
            needed_atomic=selection.amount_atomic,
            rpc_host=urlsplit(rpc).hostname if rpc else None,
        )


# -- the tool: with the agent's policy ----------------------------------------------------------


def rule_views(
    standing: ledger.Standing, facts: ledger.PurchaseFacts, now: datetime
) -> tuple[tuple[RuleBlock, ...], tuple[ChatRuleSeen, ...]]:
    """The limit rules that would refuse this payment now, and the chat rules about its host."""
    payment = facts.payment()
    amount = payment.amount_atomic or 0
    blocks: list[RuleBlock] = []
    chat: list[ChatRuleSeen] = []
    for rule in standing.rules:
        if not rule.matches(payment.host, payment.path):
            continue
        if rule.source == RuleSource.CHAT and rule.kind in (RuleKind.DENY, RuleKind.LIMIT):
            chat.append(
                ChatRuleSeen(
                    rule.id,
                    rule.kind,
                    rule.host,
                    rule.path_prefix,
                    rule.limit_atomic,
                    rule.window,
                    rule.expires_at,
                )
            )
        if rule.kind == RuleKind.LIMIT and rule.limit_atomic is not None:
            spent = standing.usage.rule_spent_atomic.get(rule.id, 0)
            if spent + amount > rule.limit_atomic:
                blocks.append(
                    RuleBlock(
                        rule.id,
                        rule.scope,
                        rule.window,
                        rule.limit_atomic,
                        max(rule.limit_atomic - spent, 0),
                        window_end(rule.window, now) if rule.window else None,
                    )
                )
    return tuple(blocks), tuple(chat)


class DiagnosisService:
    """diagnose_payment: the preflight with the calling agent's account, wallet and policy."""

    def __init__(
        self, *, db: Database, settings: Settings, sellers: SellerClient, chain: ChainService, clock: Clock
    ) -> None:
        self._db = db
        self._clock = clock
        self._diagnoser = Diagnoser(
            sellers=sellers,
            chain=chain,
            assets=settings.assets,
            rpc_urls=settings.rpc_urls,
            timeout_ms=settings.fetch_timeout_ms,
            clock=clock,
            db=db,
        )

    def _policy_view(self, session: Session, principal: Principal, facts: ledger.PurchaseFacts) -> PolicyView:
        assert principal.agent_id is not None
        now = self._clock.now()
        current = get_agent(session, principal, principal.agent_id)
        standing = ledger.standing(session, agent=current, now=now)
        context = context_for(session, agent=current, host=facts.host, pay_to=facts.selection.pay_to)
        decision = standing.judge(facts.payment(), context)
        blocks, chat = rule_views(standing, facts, now)
        return PolicyView(decision, blocks, chat)

    async def diagnose(self, principal: Principal, request: FetchPaidInput) -> Diagnosis:
        async def policy(facts: ledger.PurchaseFacts) -> PolicyView:
            return await self._db.reading(self._policy_view, principal, facts)

        return await self._diagnoser.run(request, principal=principal, policy=policy)


# -- doctor: no database, no account, no key ----------------------------------------------------


async def diagnose_without_account(
    settings: ProbeSettings, request: FetchPaidInput, *, wallet: str | None, clock: Clock
) -> Diagnosis:
    """doctor's checks: the seller, the challenge and, with a wallet, its balance. No policy."""
    sellers = SellerClient(
        max_response_bytes=DOCTOR_MAX_RESPONSE_BYTES, allow_private_hosts=settings.allow_private_hosts
    )
    chain = ChainService(settings.rpc_urls)
    try:
        diagnoser = Diagnoser(
            sellers=sellers,
            chain=chain,
            assets=settings.assets,
            rpc_urls=settings.rpc_urls,
            timeout_ms=settings.fetch_timeout_ms,
            clock=clock,
        )
        return await diagnoser.run(request, wallet=wallet)
    finally:
        await chain.aclose()
