"""/admin/agents/{id}: one agent for the people who run it: its policy (a form with every setting),
its rules, the policy changes it asked for, wallet and balance (and the retired wallets a rotation
left, with what they hold), recent payments, out-of-policy findings, tokens, and disabling it.

Owners and admins change an agent; everyone else sees the same page with its forms disabled, and
a change they post anyway is refused with a page that says why. A change that narrows what the
agent may pay is made at once; one that widens it (and issuing a token) goes through sudo mode
first: `/account/sudo?next=` this page."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import quote

import anyio
from sqlmodel import Session
from starlette.datastructures import FormData
from starlette.responses import Response

from auth.scopes import AGENT_SCOPES, Scope
from auth.sessions import SignedIn
from auth.tokens import (
    IssuedToken,
    LiveToken,
    TokenAlreadyIssued,
    TokenNotFound,
    issue_access_token,
    live_tokens,
    revoke_token,
)
from server.kit.money import format_usd
from server.kit.networks import address_url, transaction_url
from server.models import Agent, OutOfPolicyFinding, PaymentIntent, Wallet, WalletSweep
from server.payments import ledger
from server.payments.budget import day_cap_atomic
from server.payments.decisions import set_agent_disabled
from server.payments.settlement.watch import recent_findings
from server.payments.sweeps.listing import ListedWallet, listed, sweeps_of
from server.policy.model import Policy
from server.policy.rulebook import rules_for_agent
from server.policy.rules import Rule
from server.policy.service import InvalidPolicy, PolicySettings, SudoRequired, narrow_policy, update_policy
from server.tenancy.service import AgentNotFound, agent_with_policy, get_agent
from server.vocabulary import SUPPORTED_NETWORKS, Role, SweepStatus, WalletMode
from server.wallet_policies.sync import WalletPolicyWork, wallet_work
from server.wallets.service import active_wallet, wallets_of
from server.web.pages.cdp_wallet import cdp_wallet_view
from server.web.pages.common import PageHandler, Visit
from server.web.pages.policy_changes import ChangeView, latest_views
from server.web.pages.sudo import has_fresh_sudo, sudo_url
from server.web.pages.token_forms import SHOWN_ALREADY, STALE_FORM, is_nonce, new_nonce, token_id_for

PATH = "/admin/agents"
RECENT_PAYMENTS = 20
RECENT_CHANGES = 5
BALANCE_TIMEOUT_S = 3.0
MANAGERS = frozenset({Role.OWNER, Role.ADMIN})
TOKEN_TTL_DAYS = (1, 7, 30, 90, 365)
# A retired wallet's last sweep, as the page says it.
SWEEP_WORDS = {
    SweepStatus.AUTHORIZED: "authorised, not signed yet",
    SweepStatus.SIGNED: "signed, waiting to be sent",
    SweepStatus.SUBMITTED: "sent, waiting for the network",
    SweepStatus.SETTLED: "moved to the current wallet",
    SweepStatus.FAILED: "did not go through: see the audit log",
    SweepStatus.EXPIRED: "lapsed unused: nothing moved",
}

# The policy form's fields typed as text (the networks and the two switches are the others).
TEXT_FIELDS = (
    "allow_hosts",
    "deny_hosts",
    "max_usd_per_tx",
    "daily_cap_usd",
    "step_up_threshold_usd",
    "pay_to_deny",
    "velocity_max_tx",
    "velocity_max_usd",
    "velocity_window_seconds",
    "challenge_hosts",
    "challenge_path_prefixes",
    "challenge_max_usd",
)
# The setting an InvalidPolicy reason names (its text before the colon), and the form's field.
_FIELD_OF_SETTING = {
    "allow-host": "allow_hosts",
    "deny-host": "deny_hosts",
    "max-per-tx": "max_usd_per_tx",
    "daily-cap": "daily_cap_usd",
    "step-up": "step_up_threshold_usd",
    "networks": "networks",
    "pay-to-deny": "pay_to_deny",
    "velocity tx": "velocity_max_tx",
    "velocity-usd": "velocity_max_usd",
    "velocity window": "velocity_window_seconds",
    "challenge-host": "challenge_hosts",
    "challenge-path": "challenge_path_prefixes",
    "challenge-max": "challenge_max_usd",
}


def agent_url(agent_id: str) -> str:
    return f"{PATH}/{quote(agent_id, safe='')}"


def may_manage(signed_in: SignedIn) -> bool:
    return signed_in.member.role in MANAGERS


@dataclass(frozen=True)
class AgentView:
    agent: Agent
    policy: Policy
    rules: list[Rule]
    wallet: Wallet | None
    retired: list[Wallet]  # rotated away, newest first: kept for sweeping
    sweeps: list[WalletSweep]
    payments: list[PaymentIntent]
    findings: list[OutOfPolicyFinding]
    tokens: list[LiveToken]
    day_cap_atomic: int  # the most one day's payments can take: less in the wallet is a warning
    changes: list[ChangeView]  # the policy changes the agent asked for lately, newest first
    cdp: WalletPolicyWork | None  # a `cdp` wallet's policy compiled now, and how to reach CDP


def _agent_view(
    session: Session, signed_in: SignedIn, agent_id: str, now: datetime, usdc_by_network: Mapping[str, str]
) -> AgentView:
    """Everything the page shows of the agent but its balance (that is the chain's to say) and what
    CDP holds for a `cdp` wallet (CDP's)."""
    principal = signed_in.principal
    agent, policy = agent_with_policy(session, principal, agent_id)
    rules = rules_for_agent(session, agent, now=now)
    wallet = active_wallet(session, agent)
    cdp = None
    if wallet is not None and wallet.mode == WalletMode.CDP:
        cdp = wallet_work(session, agent, policy, wallet, usdc_by_network=usdc_by_network)
    return AgentView(
        agent=agent,
        policy=policy,
        rules=rules,
        wallet=wallet,
        retired=[old for old in wallets_of(session, agent) if old.retired_at is not None],
        sweeps=sweeps_of(session, principal, agent),
        payments=ledger.newest(session, principal, agent_id=agent.id, limit=RECENT_PAYMENTS, status=None),
        findings=recent_findings(session, principal, agent_id=agent.id, now=now),
        tokens=live_tokens(session, principal, org_id=agent.org_id, agent_id=agent.id, now=now),
        day_cap_atomic=day_cap_atomic(agent, policy, rules, now=now),
        changes=latest_views(session, signed_in, now, agent_id=agent.id, limit=RECENT_CHANGES),
        cdp=cdp,
    )


async def _balance(visit: Visit, view: AgentView) -> int | None:
    """The wallet's USDC balance, or None when the chain does not answer in time (or at all)."""
    wallet = view.wallet
    services = visit.services
    asset = services.settings.usdc_address(view.agent.network)
    if wallet is None or asset is None:
        return None
    with anyio.move_on_after(BALANCE_TIMEOUT_S):
        try:
            return await services.chain.balance(network=view.agent.network, asset=asset, owner=wallet.address)
        except Exception:  # a balance that cannot be read is shown as unavailable, never as an error
            return None
    return None


async def _balances(visit: Visit, view: AgentView) -> tuple[int | None, list[ListedWallet]]:
    """The wallet's balance and the retired wallets' balances, read at the same time."""
    services = visit.services
    found: dict[str, int | None] = {}
    retired: list[ListedWallet] = []

    async def current() -> None:
        found["balance"] = await _balance(visit, view)

    async def rest() -> None:
        retired.extend(await listed(services.chain, services.settings, view.agent, view.retired, view.sweeps))

    async with anyio.create_task_group() as group:
        group.start_soon(current)
        if view.retired:
            group.start_soon(rest)
    return found["balance"], retired


def _lines(text: object) -> list[str]:
    """A textarea's entries: one a line (commas separate too), blanks dropped."""
    if not isinstance(text, str):
        return []
    return [part.strip() for line in text.splitlines() for part in line.split(",") if part.strip()]


def _text(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


class FieldError(Exception):
    def __init__(self, field_name: str, sentence: str) -> None:
        super().__init__(sentence)
        self.field_name = field_name
        self.sentence = sentence


def _whole(form: FormData, name: str, label: str) -> int | None:
    text = _text(form, name)
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or len(text) > 9:
        raise FieldError(name, f"{label}: a whole number, such as 10.")
    return int(text)


# Limits the form can set or change but not remove (a blank field would keep them as they are):
# the field, and whether `current` has the limit.
_KEPT_WHEN_BLANK: tuple[tuple[str, str, Callable[[Policy], bool]], ...] = (
    ("velocity_max_tx", "velocity tx", lambda policy: policy.velocity.max_tx is not None),
    ("velocity_max_usd", "velocity-usd", lambda policy: policy.velocity.max_usd is not None),
    ("challenge_hosts", "challenge-host", lambda policy: bool(policy.challenge.hosts)),
    ("challenge_path_prefixes", "challenge-path", lambda policy: bool(policy.challenge.path_prefixes)),
    ("challenge_max_usd", "challenge-max", lambda policy: policy.challenge.max_usd is not None),
)


def settings_from_form(form: FormData, current: Policy) -> PolicySettings:
    """The policy form as a person's settings: lists as given (an empty list of allowed hosts
    allows none; an empty deny list denies none), amounts as typed, a blank threshold is off. A
    velocity or challenge limit that `current` has cannot be emptied here: that is refused by
    name rather than kept without a word."""
    networks = [str(value) for value in form.getlist("networks")]
    if not networks:
        raise FieldError("networks", "networks: choose at least one network.")
    for name, setting, has in _KEPT_WHEN_BLANK:
        if has(current) and _text(form, name) is None:
            raise FieldError(
                name, f"{setting}: this limit can be changed here but not removed; give it a value."
            )
    return PolicySettings(
        allow_hosts=_lines(form.get("allow_hosts")),
        clear_allow_hosts=not _lines(form.get("allow_hosts")),
        deny_hosts=_lines(form.get("deny_hosts")),
        clear_deny_hosts=not _lines(form.get("deny_hosts")),
        max_usd_per_tx=_text(form, "max_usd_per_tx"),
        daily_cap_usd=_text(form, "daily_cap_usd"),
        step_up_threshold_usd=_text(form, "step_up_threshold_usd") or "off",
        networks=networks,
        pay_to_deny=_lines(form.get("pay_to_deny")),
        clear_pay_to_deny=not _lines(form.get("pay_to_deny")),
        velocity_max_tx=_whole(form, "velocity_max_tx", "velocity tx"),
        velocity_max_usd=_text(form, "velocity_max_usd"),
        velocity_window_seconds=_whole(form, "velocity_window_seconds", "velocity window"),
        challenge_hosts=_lines(form.get("challenge_hosts")),
        challenge_path_prefixes=_lines(form.get("challenge_path_prefixes")),
        challenge_max_usd=_text(form, "challenge_max_usd"),
        allow_catalog_hosts=form.get("allow_catalog_hosts") == "on",
        verified_sellers_only=form.get("verified_sellers_only") == "on",
    )


def form_values(policy: Policy) -> dict[str, Any]:
    """The policy as the form shows it."""
    return {
        "allow_hosts": "\n".join(policy.allow_hosts),
        "deny_hosts": "\n".join(policy.deny_hosts),
        "max_usd_per_tx": format_usd(policy.max_usd_per_tx),
        "daily_cap_usd": format_usd(policy.daily_cap_usd),
        "step_up_threshold_usd": ""
        if policy.step_up_threshold_usd is None
        else format_usd(policy.step_up_threshold_usd),
        "networks": list(policy.networks),
        "pay_to_deny": "\n".join(policy.pay_to_deny),
        "velocity_max_tx": "" if policy.velocity.max_tx is None else str(policy.velocity.max_tx),
        "velocity_max_usd": "" if policy.velocity.max_usd is None else format_usd(policy.velocity.max_usd),
        "velocity_window_seconds": str(policy.velocity.window_seconds),
        "challenge_hosts": "\n".join(policy.challenge.hosts),
        "challenge_path_prefixes": "\n".join(policy.challenge.path_prefixes),
        "challenge_max_usd": "" if policy.challenge.max_usd is None else format_usd(policy.challenge.max_usd),
        "allow_catalog_hosts": policy.allow_catalog_hosts,
        "verified_sellers_only": policy.verified_sellers_only,
    }


def _submitted(form: FormData) -> dict[str, Any]:
    """What was posted, to show the form again as it was typed."""
    values: dict[str, Any] = {name: str(form.get(name) or "") for name in TEXT_FIELDS}
    values["networks"] = [str(value) for value in form.getlist("networks")]
    values["allow_catalog_hosts"] = form.get("allow_catalog_hosts") == "on"
    values["verified_sellers_only"] = form.get("verified_sellers_only") == "on"
    return values


def field_of(reason: str) -> str:
    """The form field an InvalidPolicy reason names ("daily-cap: ..." is the daily cap's)."""
    setting = reason.split(":", 1)[0].strip()
    return _FIELD_OF_SETTING.get(setting, "policy")


_NOTICES = {
    "policy": "The policy was changed: the new version applies to the agent's next payment.",
    "unchanged": "Nothing was changed: the policy already says that.",
    "revoked": "The token was revoked: it no longer works.",
    "disabled": "The agent is disabled: its tokens and connections are refused from now on.",
    "enabled": "The agent is enabled again.",
}


_REFUSED = "The policy was not changed: correct the settings marked below."


@dataclass
class PageState:
    values: dict[str, Any] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    issued: IssuedToken | None = None
    problem: str | None = None  # the sentence above the page when a form was refused


async def _render(
    visit: Visit, agent_id: str, state: PageState | None = None, *, status: int = 200
) -> Response:
    services = visit.services
    signed_in = visit.member
    view = await services.db.reading(
        _agent_view, signed_in, agent_id, services.clock.now(), services.settings.assets
    )
    found: dict[str, Any] = {}

    async def read_balances() -> None:
        found["balances"] = await _balances(visit, view)

    async def check_cdp() -> None:
        if view.cdp is not None:
            found["cdp"] = await cdp_wallet_view(view.cdp, reach=services.cdp)

    async with anyio.create_task_group() as both:  # each bounded: the chain's 3 s, CDP's 3 s
        both.start_soon(read_balances)
        both.start_soon(check_cdp)
    balance, retired = found["balances"]
    state = state or PageState()
    done = visit.request.query_params.get("done")
    return visit.render(
        "agent.html",
        {
            "title": view.agent.name,
            "nav": "home",
            "view": view,
            "agent_url": agent_url(view.agent.id),
            "balance": None if balance is None else format_usd(balance, atomic=True),
            "low_balance": balance is not None and balance < view.day_cap_atomic,
            "day_cap": format_usd(view.day_cap_atomic, atomic=True),
            "wallet_url": address_url(view.agent.network, view.wallet.address) if view.wallet else None,
            "cdp": found.get("cdp"),
            "retired": retired,
            "address_url": address_url,
            "sweep_words": SWEEP_WORDS,
            "values": state.values or form_values(view.policy),
            "errors": state.errors,
            "issued": state.issued,
            "may_manage": may_manage(signed_in),
            "networks": SUPPORTED_NETWORKS,
            "ttl_days": TOKEN_TTL_DAYS,
            "nonce": new_nonce(),
            "scopes": sorted(AGENT_SCOPES),
            "transaction_url": transaction_url,
            "usd": lambda atomic: format_usd(atomic, atomic=True),
            "describe_rule": describe_rule,
            "notice": _NOTICES.get(done or ""),
            "error": state.problem,
        },
        status=status,
    )


async def _show(visit: Visit) -> Response:
    return await _render(visit, str(visit.request.path_params["agent_id"]))


async def _change_form(visit: Visit) -> tuple[FormData, Response | None]:
    """The posted form, after its CSRF token; a page refusing anyone who may not change agents."""
    form = await visit.request.form()
    visit.check_csrf(form.get("csrf"))
    signed_in = visit.member
    if not may_manage(signed_in):
        agent_id = str(visit.request.path_params["agent_id"])
        return form, visit.message(
            "Your role cannot change agents",
            f"You are a {signed_in.member.role} of this organisation: you may see its agents, but only "
            "an owner or an admin can change them.",
            status=403,
            link=(agent_url(agent_id), "Back to the agent"),
        )
    return form, None


def _policy_of(session: Session, signed_in: SignedIn, agent_id: str) -> Policy:
    return agent_with_policy(session, signed_in.principal, agent_id)[1]


def _narrow(
    session: Session, signed_in: SignedIn, agent_id: str, settings: PolicySettings, now: datetime
) -> tuple[int, int]:
    """The policy's version before and after a narrowing change."""
    agent, before = agent_with_policy(session, signed_in.principal, agent_id)
    after = narrow_policy(session, agent=agent, settings=settings, actor=signed_in.principal.actor, now=now)
    return before.version, after.version


def _widen(
    session: Session, signed_in: SignedIn, agent_id: str, settings: PolicySettings, now: datetime
) -> tuple[int, int]:
    """The policy's version before and after any change, widening included (sudo mode only)."""
    agent, before = agent_with_policy(session, signed_in.principal, agent_id)
    after = update_policy(session, agent=agent, settings=settings, actor=signed_in.principal.actor, now=now)
    return before.version, after.version


async def _change_policy(visit: Visit) -> Response:
    form, refused = await _change_form(visit)
    if refused is not None:
        return refused
    services = visit.services
    agent_id = str(visit.request.path_params["agent_id"])
    here = agent_url(agent_id)
    try:
        current = await services.db.reading(_policy_of, visit.member, agent_id)
        settings = settings_from_form(form, current)
        before, after = await services.db.writing(
            _narrow, visit.member, agent_id, settings, services.clock.now()
        )
    except FieldError as error:
        state = PageState(
            values=_submitted(form), errors={error.field_name: error.sentence}, problem=_REFUSED
        )
        return await _render(visit, agent_id, state, status=400)
    except InvalidPolicy as error:
        reason = str(error.extra.get("reason", error.describe()))
        state = PageState(values=_submitted(form), errors={field_of(reason): reason}, problem=_REFUSED)
        return await _render(visit, agent_id, state, status=400)
    except SudoRequired:
        # Nothing was written. In sudo mode the same settings make the widening change; otherwise
        # the sudo page comes first, and the person makes the change again afterwards.
        if not await has_fresh_sudo(visit):
            return visit.redirect(sudo_url(here))
        before, after = await services.db.writing(
            _widen, visit.member, agent_id, settings, services.clock.now()
        )
    return visit.redirect(f"{here}?done={'policy' if after != before else 'unchanged'}#policy")


def _issue(
    session: Session,
    signed_in: SignedIn,
    agent_id: str,
    *,
    token_id: str,
    scopes: frozenset[Scope],
    ttl_seconds: int,
    label: str | None,
    audience: str,
    now: datetime,
) -> IssuedToken:
    agent = get_agent(session, signed_in.principal, agent_id)
    return issue_access_token(
        session,
        org_id=agent.org_id,
        agent_id=agent.id,
        scopes=scopes,
        audience=audience,
        ttl_seconds=ttl_seconds,
        created_by=signed_in.principal.actor,
        now=now,
        label=label,
        token_id=token_id,
    )


async def _issue_token(visit: Visit) -> Response:
    """A new token for the agent's MCP endpoint, shown in this answer only. Issuing widens what
    can act for the agent, so it needs sudo mode. The form's one-time nonce names the token, so
    the same form posted again (a reload of this answer) issues nothing and says so."""
    form, refused = await _change_form(visit)
    if refused is not None:
        return refused
    services = visit.services
    agent_id = str(visit.request.path_params["agent_id"])
    here = agent_url(agent_id)
    chosen = {str(value) for value in form.getlist("scopes")}
    label = _text(form, "label")
    days = _text(form, "ttl_days") or "30"
    errors: dict[str, str] = {}
    if not chosen or not chosen <= {str(scope) for scope in AGENT_SCOPES}:
        errors["scopes"] = "Choose at least one of the permissions listed."
    if not days.isdigit() or int(days) not in TOKEN_TTL_DAYS:
        errors["ttl_days"] = "Choose one of the lifetimes listed."
    if label is not None and len(label) > 120:
        errors["label"] = "A label has at most 120 characters."
    if errors:
        problem = "No token was issued: correct the choices marked below."
        return await _render(visit, agent_id, PageState(errors=errors, problem=problem), status=400)
    nonce = _text(form, "nonce")
    if not is_nonce(nonce):
        return await _render(visit, agent_id, PageState(problem=STALE_FORM), status=400)
    if not await has_fresh_sudo(visit):
        return visit.redirect(sudo_url(here))
    assert nonce is not None  # is_nonce
    token_id = token_id_for(
        services.settings.master, member_id=visit.member.member.id, subject=agent_id, nonce=nonce
    )
    try:
        issued = await services.db.writing(
            _issue,
            visit.member,
            agent_id,
            token_id=token_id,
            scopes=frozenset(Scope(name) for name in chosen),
            ttl_seconds=int(days) * 86_400,
            label=label,
            audience=services.settings.mcp_url,
            now=services.clock.now(),
        )
    except TokenAlreadyIssued:
        return await _render(visit, agent_id, PageState(problem=SHOWN_ALREADY), status=409)
    return await _render(visit, agent_id, PageState(issued=issued))


def _live_token(
    session: Session, signed_in: SignedIn, agent_id: str, token_id: str, now: datetime
) -> tuple[Agent, LiveToken]:
    """One of the agent's tokens that still works; TokenNotFound for any other."""
    agent = get_agent(session, signed_in.principal, agent_id)
    for live in live_tokens(session, signed_in.principal, org_id=agent.org_id, agent_id=agent.id, now=now):
        if live.row.id == token_id:
            return agent, live
    raise TokenNotFound()


async def _confirm_revoke(visit: Visit) -> Response:
    """Revoking asks once: this page says what stops, and its button posts the revocation."""
    services = visit.services
    agent_id = str(visit.request.path_params["agent_id"])
    token_id = str(visit.request.path_params["token_id"])
    agent, live = await services.db.reading(
        _live_token, visit.member, agent_id, token_id, services.clock.now()
    )
    return visit.render(
        "token_revoke.html",
        {
            "title": "Revoke this token?",
            "nav": "home",
            "agent": agent,
            "token": live.row,
            "agent_url": agent_url(agent.id),
            "may_manage": may_manage(visit.member),
        },
    )


def _revoke(session: Session, signed_in: SignedIn, agent_id: str, token_id: str, now: datetime) -> None:
    _live_token(session, signed_in, agent_id, token_id, now)  # this agent's, and still working
    revoke_token(session, signed_in.principal, token_id=token_id, now=now)


async def _revoke_token(visit: Visit) -> Response:
    _, refused = await _change_form(visit)
    if refused is not None:
        return refused
    services = visit.services
    agent_id = str(visit.request.path_params["agent_id"])
    token_id = str(visit.request.path_params["token_id"])
    await services.db.writing(_revoke, visit.member, agent_id, token_id, services.clock.now())
    return visit.redirect(f"{agent_url(agent_id)}?done=revoked#tokens")


def _switch(session: Session, signed_in: SignedIn, agent_id: str, disabled: bool, now: datetime) -> None:
    set_agent_disabled(session, signed_in.principal, agent_id=agent_id, disabled=disabled, now=now)


def _switching(disabled: bool) -> PageHandler:
    """Disabling never waits: it narrows what the agent may do to nothing. Enabling gives back
    only what its policy already allowed."""

    async def switch(visit: Visit) -> Response:
        _, refused = await _change_form(visit)
        if refused is not None:
            return refused
        services = visit.services
        agent_id = str(visit.request.path_params["agent_id"])
        await services.db.writing(_switch, visit.member, agent_id, disabled, services.clock.now())
        return visit.redirect(f"{agent_url(agent_id)}?done={'disabled' if disabled else 'enabled'}")

    return switch


def describe_rule(rule: Rule) -> str:
    """A rule in words: what it does, where, and for how long."""
    parts = [f"{rule.kind}"]
    if rule.limit_atomic is not None:
        parts.append(f"${format_usd(rule.limit_atomic, atomic=True)}")
        if rule.window is not None:
            parts.append(f"per {rule.window}")
    if rule.host:
        parts.append(f"on {rule.host}")
    if rule.path_prefix:
        parts.append(f"under {rule.path_prefix}")
    parts.append(f"({rule.scope} rule, from {rule.source})")
    return " ".join(parts)


def _found(handler: PageHandler) -> PageHandler:
    """The handler, with an agent or token that is not there (or not this organisation's) a 404
    page that leads back to the overview."""

    async def answered(visit: Visit) -> Response:
        try:
            return await handler(visit)
        except (AgentNotFound, TokenNotFound) as error:
            return visit.message(
                "Not found here", error.describe(), status=404, link=("/admin", "See the overview")
            )

    answered.__doc__ = handler.__doc__
    return answered


show = _found(_show)
change_policy = _found(_change_policy)
issue_token = _found(_issue_token)
confirm_revoke = _found(_confirm_revoke)
revoke = _found(_revoke_token)
disable = _found(_switching(True))
enable = _found(_switching(False))
