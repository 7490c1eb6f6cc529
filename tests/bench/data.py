"""Data the benchmarks set up through the services, where the services' own signatures are the
detail: one place to add an organisation's rule."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from sqlmodel import Session

from server.policy.rulebook import add_rule
from server.policy.rules import Rule
from server.tenancy.service import rule_target
from server.vocabulary import RuleScope
from tests.support.principals import OPERATOR

ACTOR = "bench:setup"


def add_org_rule(
    session: Session,
    *,
    org_id: str,
    kind: str,
    host: str | None,
    path_prefix: str | None,
    limit_usd: Decimal | None,
    window: str | None,
    now: datetime,
) -> Rule:
    return add_rule(
        session,
        target=rule_target(session, OPERATOR, RuleScope.ORG, org_id),
        kind=kind,
        host=host,
        path_prefix=path_prefix,
        limit_usd=limit_usd,
        window=window,
        actor=ACTOR,
        now=now,
    )
