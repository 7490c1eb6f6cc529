"""The admin API's agents made, their wallets, one payment, and the catalog of sellers.

A new agent starts as the command line makes one: a first policy that allows no host and its
default weekly rule. A wallet is shown with its address, how it signs and its USDC balance read
from the chain with a short timeout (`balance` null and `balanceError` when it cannot be read);
its key never comes back. The list of an agent's wallets adds the retired ones, what each holds
and its sweeps. The catalog is the server's, the same for every organisation: accepted
sellers (listed or suspended), a page at a time."""

from __future__ import annotations

from datetime import datetime

import anyio
from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from auth.principal import Principal
from server.catalog.service import accepted_page, find_accepted
from server.models import Agent, Wallet
from server.payments.ledger import find_payment
from server.payments.sweeps.listing import agent_wallets
from server.tenancy.service import create_agent, find_member, find_org, find_team, get_agent
from server.wallets.service import active_wallet
from server.web.api import cursors
from server.web.api.parts import body_of, now_of, page_size, path, reading, writing
from server.web.api.schemas import (
    AgentCreate,
    AgentDocument,
    CatalogEntryDocument,
    CatalogPage,
    PaymentDocument,
    WalletDocument,
    WalletList,
)
from server.web.http import NO_STORE, services_of

BALANCE_TIMEOUT_S = 2.0


def _create_agent(
    session: Session, principal: Principal, asked: AgentCreate, *, now: datetime
) -> AgentDocument:
    assert principal.org_id is not None  # an admin token is bound to one organisation
    org = find_org(session, principal, principal.org_id)
    team = None if asked.teamId is None else find_team(session, principal, asked.teamId, org_id=org.id)
    member = (
        None if asked.memberId is None else find_member(session, principal, asked.memberId, org_id=org.id)
    )
    agent = create_agent(
        session,
        org=org,
        name=asked.name,
        network=asked.network,
        actor=principal.actor,
        now=now,
        team=team,
        member=member,
    )
    return AgentDocument.of(agent)


async def create_agent_route(request: Request, principal: Principal) -> Response:
    """A new agent (201): its policy allows no host until one is added."""
    asked = await body_of(request, AgentCreate)
    document = await writing(request, _create_agent, principal, asked, now=now_of(request))
    return JSONResponse(document.model_dump(mode="json"), status_code=201, headers=NO_STORE)


def _agent_wallet(session: Session, principal: Principal, agent_id: str) -> tuple[Agent, Wallet | None]:
    agent = get_agent(session, principal, agent_id)
    return agent, active_wallet(session, agent)


async def show_wallet(request: Request, principal: Principal) -> BaseModel:
    agent, wallet = await reading(request, _agent_wallet, principal, path(request, "agent_id"))
    if wallet is None:
        return WalletDocument.of(agent, None, None, "no_wallet")
    services = services_of(request)
    asset = services.settings.usdc_address(agent.network)
    if asset is None or not services.chain.has_rpc(agent.network):
        return WalletDocument.of(agent, wallet, None, "chain_unavailable")
    balance: int | None = None
    with anyio.move_on_after(BALANCE_TIMEOUT_S) as waited:
        balance = await services.chain.balance(network=agent.network, asset=asset, owner=wallet.address)
    if waited.cancelled_caught:
        return WalletDocument.of(agent, wallet, None, "timeout")
    return WalletDocument.of(agent, wallet, balance, None if balance is not None else "chain_unavailable")


async def list_wallets(request: Request, principal: Principal) -> BaseModel:
    """Every wallet the agent had, current and retired, with balances and sweeps."""
    services = services_of(request)
    found = await agent_wallets(
        services.db, services.chain, services.settings, principal, agent=path(request, "agent_id")
    )
    return WalletList.of(found)


def _payment(session: Session, principal: Principal, payment_id: str) -> PaymentDocument:
    return PaymentDocument.of(find_payment(session, principal, payment_id))


async def show_payment(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _payment, principal, path(request, "payment_id"))


def _catalog(session: Session, *, after: tuple[datetime, str] | None, limit: int) -> CatalogPage:
    found = accepted_page(session, after=after, limit=limit + 1)
    shown = found[:limit]
    last = shown[-1].entry if shown else None
    more = len(found) > limit and last is not None
    return CatalogPage(
        entries=[CatalogEntryDocument.of(item.entry, item.offers) for item in shown],
        nextCursor=cursors.encode(last.created_at, last.id) if more and last is not None else None,
    )


async def list_catalog(request: Request, principal: Principal) -> BaseModel:
    cursor = request.query_params.get("cursor")
    after = cursors.decode(cursor) if cursor else None
    return await reading(request, _catalog, after=after, limit=page_size(request))


def _entry(session: Session, entry_id: str) -> CatalogEntryDocument:
    found = find_accepted(session, entry_id)
    return CatalogEntryDocument.of(found.entry, found.offers)


async def show_catalog_entry(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _entry, path(request, "entry_id"))
