"""Every query on bearer tokens, and the one question identity asks about an agent: is it enabled.

A token belongs to one organisation, and an agent token to one agent. Finding a token by its
secret's hash is how a request becomes a principal, so it is the one read not made for one.
"""

from __future__ import annotations

from typing import ClassVar

from server.kit.repository import TenantRepository
from server.models import AccessToken, Agent


class TokenRepository(TenantRepository[AccessToken]):
    model = AccessToken
    agent_column: ClassVar[str | None] = "agent_id"

    def by_hash(self, token_hash: str) -> AccessToken | None:
        return self.first(self.statement().where(AccessToken.token_hash == token_hash))

    def agent_enabled(self, agent_id: str) -> bool:
        """Whether the agent exists and is not disabled."""
        agent = self.session.get(Agent, agent_id)
        return agent is not None and agent.disabled_at is None
