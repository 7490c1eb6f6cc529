"""Judging where a request goes, before it goes: the first request and every redirect hop.

The seller client calls the judge with each hop's canonical target before requesting it. A hop the
policy could never pay at (a host not allowed, a deny rule, a challenge host or path outside the
allowlist) ends the exchange there with the policy's denial: nothing is sent to it.
"""

from __future__ import annotations

from server.policy.engine import Decision, judge_location
from server.policy.model import Policy
from server.policy.rules import Rule
from server.sellers.client import Judge
from server.sellers.urls import Target


class LocationDenied(Exception):
    """The policy refused a hop before it was requested. Not an error code of its own: fetch_paid
    reports it as policy_denied, quote_payment as would_deny."""

    def __init__(self, decision: Decision, target: Target) -> None:
        super().__init__(", ".join(decision.reasons))
        self.decision = decision
        self.target = target


def judge_for(policy: Policy, rules: tuple[Rule, ...], *, listed: bool) -> Judge:
    def judge(target: Target) -> None:
        decision = judge_location(policy, rules, host=target.host, path=target.path, listed=listed)
        if not decision.allowed:
            raise LocationDenied(decision, target)

    return judge
