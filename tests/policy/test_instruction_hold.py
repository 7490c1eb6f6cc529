"""A challenge whose text reads like orders to the agent waits for a human, after every rule."""

from __future__ import annotations

from decimal import Decimal

from server.policy.engine import Context, Decision, Payment, Usage, evaluate
from server.policy.model import Policy

POLICY = Policy(version=3, networks=("eip155:84532",), allow_hosts=("api.example.com",))
# A payee the organisation already paid: the first-payment hold is not what these tests are about.
KNOWN = Context(pay_to_known=True)


def decide(policy: Policy, pay: Payment) -> Decision:
    return evaluate(policy, (), Usage(), pay, KNOWN)


def payment(**changes: object) -> Payment:
    fields: dict[str, object] = {
        "host": "api.example.com",
        "path": "/premium",
        "network": "eip155:84532",
        "asset": "USDC",
        "pay_to": "0x" + "34" * 20,
        "amount_atomic": 10_000,
        **changes,
    }
    return Payment(**fields)  # type: ignore[arg-type]


def test_instruction_like_text_holds_an_allowed_payment() -> None:
    decision = decide(POLICY, payment(instruction_like_description=True))
    assert decision.outcome == "hold"
    assert decision.hold_reason == "instruction_like_description"
    assert decision.threshold_usd is None
    assert decision.policy_version == 3


def test_a_rule_that_fails_denies_instead() -> None:
    decision = decide(POLICY, payment(instruction_like_description=True, amount_atomic=5_000_000))
    assert decision.outcome == "deny"
    assert decision.reasons == ("amount_exceeds_per_transaction",)


def test_it_comes_before_the_threshold() -> None:
    policy = POLICY.with_changes(step_up_threshold_usd=Decimal("0.001"))
    assert decide(policy, payment(instruction_like_description=True)).hold_reason == (
        "instruction_like_description"
    )
    assert decide(policy, payment()).hold_reason == "threshold"


def test_plain_text_changes_nothing() -> None:
    assert decide(POLICY, payment()).outcome == "allow"
