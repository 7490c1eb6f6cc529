"""The admin API's agent tokens: list an agent's working tokens (never a secret), issue one (its
secret shown in that answer only) and revoke one. Issuing will ask for a sudo confirmation once
that exists; today an admin:write token issues directly."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request

from auth.principal import Principal
from auth.scopes import Scope
from auth.tokens import TokenNotFound, issue_access_token, live_tokens, revoke_token
from server.tenancy.service import get_agent
from server.web.api.parts import body_of, now_of, path, reading, writing
from server.web.api.schemas import TokenDocument, TokenIssue, TokenIssued, TokenList
from server.web.http import services_of


def _tokens(session: Session, principal: Principal, agent_id: str, *, now: datetime) -> TokenList:
    agent = get_agent(session, principal, agent_id)
    rows = live_tokens(session, principal, org_id=agent.org_id, agent_id=agent.id, now=now)
    return TokenList(tokens=[TokenDocument.of(live.row, last_used_at=live.last_used_at) for live in rows])


async def list_tokens(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _tokens, principal, path(request, "agent_id"), now=now_of(request))


def _issue(
    session: Session, principal: Principal, agent_id: str, asked: TokenIssue, *, audience: str, now: datetime
) -> TokenIssued:
    agent = get_agent(session, principal, agent_id)
    issued = issue_access_token(
        session,
        org_id=agent.org_id,
        agent_id=agent.id,
        scopes=frozenset(Scope(name) for name in asked.scopes),
        audience=audience,
        ttl_seconds=asked.ttlSeconds,
        created_by=principal.actor,
        now=now,
        label=asked.label,
    )
    return TokenIssued(
        id=issued.token_id, token=issued.token, scopes=list(issued.scopes), expiresAt=issued.expires_at
    )


async def issue_token(request: Request, principal: Principal) -> BaseModel:
    asked = await body_of(request, TokenIssue)
    audience = services_of(request).settings.mcp_url
    agent_id = path(request, "agent_id")
    return await writing(request, _issue, principal, agent_id, asked, audience=audience, now=now_of(request))


def _revoke(
    session: Session, principal: Principal, agent_id: str, token_id: str, *, now: datetime
) -> TokenDocument:
    agent = get_agent(session, principal, agent_id)
    live = live_tokens(session, principal, org_id=agent.org_id, agent_id=agent.id, now=now)
    if token_id not in {token.row.id for token in live}:
        raise TokenNotFound()  # another agent's, an admin token, or one that already stopped working
    return TokenDocument.of(revoke_token(session, principal, token_id=token_id, now=now))


async def revoke_agent_token(request: Request, principal: Principal) -> BaseModel:
    agent_id, token_id = path(request, "agent_id"), path(request, "token_id")
    return await writing(request, _revoke, principal, agent_id, token_id, now=now_of(request))
