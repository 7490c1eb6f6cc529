"""Who a request acts as, and therefore what it may read.

- an agent (an agent token): one agent of one organisation, with the scopes its token carries;
- a member (a person signed in with a passkey) of one organisation;
- an organisation's admin token (the admin API);
- the operator (the command line, which holds the database's own credentials) and the system
  (background jobs): both act across organisations, and say so explicitly.

Repositories take a principal and scope every read by it (see server/kit/repository.py), so no
lookup by id can reach another organisation's rows, or another agent's for an agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from auth.scopes import Scope


class PrincipalKind(StrEnum):
    AGENT = "agent"
    MEMBER = "member"
    ADMIN = "admin"
    OPERATOR = "operator"
    SYSTEM = "system"


@dataclass(frozen=True)
class Principal:
    kind: PrincipalKind
    org_id: str | None  # None only for the operator and the system
    agent_id: str | None = None
    member_id: str | None = None
    token_id: str | None = None
    scopes: frozenset[Scope] = frozenset()
    client_id: str | None = None
    name: str | None = None  # the operator's or the job's name, for the audit log

    @classmethod
    def for_agent(
        cls,
        *,
        org_id: str,
        agent_id: str,
        token_id: str,
        scopes: frozenset[Scope],
        client_id: str | None = None,
    ) -> Principal:
        return cls(PrincipalKind.AGENT, org_id, agent_id, None, token_id, scopes, client_id)

    @classmethod
    def for_member(cls, *, org_id: str, member_id: str) -> Principal:
        """A signed-in person: reads their organisation (never another's)."""
        return cls(PrincipalKind.MEMBER, org_id, member_id=member_id)

    @classmethod
    def for_admin_token(cls, *, org_id: str, token_id: str, scopes: frozenset[Scope]) -> Principal:
        return cls(PrincipalKind.ADMIN, org_id, token_id=token_id, scopes=scopes)

    @classmethod
    def operator(cls, name: str) -> Principal:
        """The command line: it holds the database's credentials, so it may read any organisation."""
        return cls(PrincipalKind.OPERATOR, None, name=name)

    @classmethod
    def system(cls, name: str) -> Principal:
        """A background job of the server itself."""
        return cls(PrincipalKind.SYSTEM, None, name=name)

    def has(self, scope: Scope) -> bool:
        return scope in self.scopes

    @property
    def unrestricted(self) -> bool:
        """Reads every organisation: only the operator and the system."""
        return self.kind in (PrincipalKind.OPERATOR, PrincipalKind.SYSTEM)

    @property
    def actor(self) -> str:
        """How audit events name this principal."""
        if self.kind is PrincipalKind.AGENT:
            return f"agent:{self.agent_id}"
        if self.kind is PrincipalKind.MEMBER:
            return f"member:{self.member_id}"
        if self.kind is PrincipalKind.ADMIN:
            return f"token:{self.token_id}"
        return str(self.name)
