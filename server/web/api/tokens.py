"""The admin API's agent tokens: list an agent's working tokens (never a secret), ask for one and
revoke one. A new token widens what can pay, so issuing waits for a member's passkey: the answer
is 202 with the confirmation page, which shows the token once after confirming."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlmodel import Session
from starlette.requests import Request
from starlette.responses import Response

from auth.principal import Principal
from auth.tokens import TokenNotFound, live_tokens, revoke_token
from server.tenancy.service import get_agent
from server.vocabulary import PendingChangeKind
from server.web.api.confirmations import ask_for_agent, confirmation_required
from server.web.api.parts import body_of, now_of, path, reading, writing
from server.web.api.schemas import TokenDocument, TokenIssue, TokenList
from server.web.http import services_of


def _tokens(session: Session, principal: Principal, agent_id: str, *, now: datetime) -> TokenList:
    agent = get_agent(session, principal, agent_id)
    rows = live_tokens(session, principal, org_id=agent.org_id, agent_id=agent.id, now=now)
    return TokenList(tokens=[TokenDocument.of(live.row, last_used_at=live.last_used_at) for live in rows])


async def list_tokens(request: Request, principal: Principal) -> BaseModel:
    return await reading(request, _tokens, principal, path(request, "agent_id"), now=now_of(request))


async def issue_token(request: Request, principal: Principal) -> Response:
    asked = await body_of(request, TokenIssue)
    change: dict[str, Any] = {
        "scopes": sorted(asked.scopes),
        "ttlSeconds": asked.ttlSeconds,
        "label": asked.label,
        "audience": services_of(request).settings.mcp_url,
    }
    row = await writing(
        request,
        ask_for_agent,
        principal,
        path(request, "agent_id"),
        kind=PendingChangeKind.NEW_CREDENTIAL,
        change=change,
        now=now_of(request),
    )
    return confirmation_required(request, row)


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
