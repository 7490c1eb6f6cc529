"""Who a request acts as: one agent of one organisation, with the scopes its token carries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    token_id: str
    org_id: str
    agent_id: str | None
    scopes: frozenset[str]
    client_id: str | None = None

    def has(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def actor(self) -> str:
        """How audit events name this principal."""
        return f"agent:{self.agent_id}" if self.agent_id else f"token:{self.token_id}"
