"""Who may let an application act for which agent, with which scopes.

- An owner or admin may connect any enabled agent of the organisation, with every agent scope.
- An approver may connect only the agents they are the person of (`agent.member_id`), with every
  agent scope.
- A viewer may connect only the agents they are the person of, and only with read scopes
  (`payments:read`, `catalog:read`): a viewer cannot let anything pay or propose rules.
- Nobody grants `admin` to an application this way.
"""

from __future__ import annotations

from auth.scopes import AGENT_SCOPES, READ_SCOPES, Scope
from server.models import Agent, Member
from server.vocabulary import Role

ANY_AGENT_ROLES = frozenset({Role.OWNER, Role.ADMIN})


def grantable_scopes(role: Role) -> frozenset[Scope]:
    return READ_SCOPES if role == Role.VIEWER else AGENT_SCOPES


def may_delegate(member: Member, agent: Agent) -> bool:
    if member.disabled_at is not None or agent.disabled_at is not None or agent.org_id != member.org_id:
        return False
    return member.role in ANY_AGENT_ROLES or agent.member_id == member.id


def may_revoke(member: Member, *, agent: Agent, granted_by: str | None) -> bool:
    """Owners and admins revoke any connection of the organisation; others those they made, or
    those of agents they are the person of."""
    if member.org_id != agent.org_id or member.disabled_at is not None:
        return False
    return member.role in ANY_AGENT_ROLES or granted_by == member.id or agent.member_id == member.id
