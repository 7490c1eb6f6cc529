"""Payment intent states and the only moves between them.

`created`: held for a human, not counted. `authorized`: the policy allowed it; it counts against
every window from now on. `submitted`: the signed payment left for the seller. `settlement_pending`:
the seller served it; `settled` only once the transfer is found on-chain. `failed` and `expired`
keep counting until their authorisation's `validBefore` has passed.
"""

from __future__ import annotations

from datetime import datetime

from server.models import PaymentIntent
from server.payments.errors import IllegalTransition
from server.vocabulary import IntentStatus

S = IntentStatus

TRANSITIONS: dict[IntentStatus, frozenset[IntentStatus]] = {
    S.CREATED: frozenset({S.AUTHORIZED, S.FAILED, S.EXPIRED}),
    S.AUTHORIZED: frozenset({S.SUBMITTED, S.FAILED, S.EXPIRED}),
    S.SUBMITTED: frozenset({S.SETTLEMENT_PENDING, S.SETTLED, S.FAILED, S.EXPIRED}),
    S.SETTLEMENT_PENDING: frozenset({S.SETTLED, S.FAILED, S.EXPIRED}),
    # Only chain evidence moves a payment out of a final state: the transfer was found after all.
    S.FAILED: frozenset({S.SETTLED}),
    S.EXPIRED: frozenset({S.SETTLED}),
    S.SETTLED: frozenset(),
}

# What the purchase flow may still record about a payment the chain already showed as settled.
SETTLED_STAYS = frozenset({S.SUBMITTED, S.SETTLEMENT_PENDING, S.FAILED, S.EXPIRED})


def transition(intent: PaymentIntent, to: IntentStatus, *, now: datetime) -> None:
    if to not in TRANSITIONS[intent.status]:
        raise IllegalTransition(detail=f"{intent.status} -> {to}")
    intent.status = to
    intent.updated_at = now
