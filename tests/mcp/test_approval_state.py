"""The sealed requestState of a held fetch_paid (2026-07-28): it opens only for the agent, the tool
and the arguments it was sealed for, before it expires, under the master key of the deployment."""

from __future__ import annotations

from datetime import timedelta

import pytest

from auth.principal import Principal
from auth.scopes import AGENT_SCOPES
from server.kit.crypto import MasterKey
from server.kit.errors import InvalidInput
from server.mcp.approval_state import ApprovalState, ApprovalStateSealer
from tests.support.clocks import written

NOW = written(2026, 12, 1, 12, 0)
AGENT = Principal.for_agent(org_id="org_1", agent_id="agt_1", token_id="tok_1", scopes=AGENT_SCOPES)
STATE = ApprovalState("apr_1", "key-12345678", "approval")
ARGUMENTS = {"url": "https://api.example.com/x", "method": None, "maxAmountUsd": "0.05"}


def sealer(byte: int = 7) -> ApprovalStateSealer:
    return ApprovalStateSealer(MasterKey(bytes([byte]) * 32).derive("paywarden mcp approval state"))


def sealed(by: ApprovalStateSealer | None = None) -> str:
    return (by or sealer()).seal(
        STATE, principal=AGENT, tool="fetch_paid", arguments=ARGUMENTS, expires_at=NOW + timedelta(minutes=25)
    )


def reason(token: object, *, by: ApprovalStateSealer | None = None, **overrides: object) -> str:
    opened = dict(principal=AGENT, tool="fetch_paid", arguments=ARGUMENTS, now=NOW) | overrides
    with pytest.raises(InvalidInput) as refused:
        (by or sealer()).open(token, **opened)  # type: ignore[arg-type]
    return str(refused.value.reason)


def test_a_state_opens_in_any_process_holding_the_master_key() -> None:
    token = sealed()
    assert (
        sealer().open(token, principal=AGENT, tool="fetch_paid", arguments=dict(ARGUMENTS), now=NOW) == STATE
    )
    assert "apr_1" not in token
    assert "key-12345678" not in token
    assert sealed() != token  # a fresh nonce each time


def test_other_arguments_are_a_mismatch() -> None:
    assert reason(sealed(), arguments={**ARGUMENTS, "maxAmountUsd": "0.50"}) == "approval_state_mismatch"
    assert (
        reason(sealed(), arguments={**ARGUMENTS, "idempotencyKey": "other-key-1"})
        == "approval_state_mismatch"
    )


@pytest.mark.parametrize(
    "overrides",
    [
        {
            "principal": Principal.for_agent(
                org_id="org_1", agent_id="agt_2", token_id="t", scopes=AGENT_SCOPES
            )
        },
        {
            "principal": Principal.for_agent(
                org_id="org_2", agent_id="agt_1", token_id="t", scopes=AGENT_SCOPES
            )
        },
        {"tool": "quote_payment"},
        {"now": NOW + timedelta(minutes=25)},
    ],
    ids=["another agent", "another organisation", "another tool", "expired"],
)
def test_a_foreign_or_expired_state_is_invalid(overrides: dict[str, object]) -> None:
    assert reason(sealed(), **overrides) == "invalid_approval_state"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "token",
    [None, 42, "", "pwas1.", "pwas1.!!!", "pwas1." + "A" * 60, "x" * 5000, "v1.abc"],
)
def test_malformed_states_are_invalid(token: object) -> None:
    assert reason(token) == "invalid_approval_state"


def test_a_tampered_or_foreign_key_state_is_invalid() -> None:
    token = sealed()
    middle = len(token) // 2
    flipped = token[:middle] + ("B" if token[middle] != "B" else "C") + token[middle + 1 :]
    assert reason(flipped) == "invalid_approval_state"
    assert reason(token, by=sealer(8)) == "invalid_approval_state"
