"""Payment intent states and the only moves between them.

`created`: held for a human, not counted. `authorized`: the policy allowed it; it counts against
every window from now on. `submitted`: the signed payment left for the seller. `settlement_pending`:
the seller served it; `settled` only once the transfer is found on-chain. `failed` and `expired`
keep counting until their authorisation's `validBefore` has passed.
"""

from __future__ import annotations

from datetime import datetime

from server.kit.errors import PaywardenError
from server.models import PaymentIntent

STATUSES = ("created", "authorized", "submitted", "settlement_pending", "settled", "failed", "expired")
COUNTED = ("authorized", "submitted", "settlement_pending", "settled")
COUNTED_UNTIL_VALID_BEFORE = ("failed", "expired")
# The signed authorisation left this process: the organisation may have paid this payee.
SENT = ("submitted", "settlement_pending", "settled")

TRANSITIONS: dict[str, frozenset[str]] = {
    "created": frozenset({"authorized", "failed", "expired"}),
    "authorized": frozenset({"submitted", "failed", "expired"}),
    "submitted": frozenset({"settlement_pending", "settled", "failed", "expired"}),
    "settlement_pending": frozenset({"settled", "failed", "expired"}),
    # Only chain evidence moves a payment out of a final state: the transfer was found after all.
    "failed": frozenset({"settled"}),
    "expired": frozenset({"settled"}),
    "settled": frozenset(),
}


class IllegalTransition(PaywardenError):
    code = "internal_error"
    message = "Unexpected error in the server."


def transition(intent: PaymentIntent, to: str, *, now: datetime) -> None:
    if to not in TRANSITIONS[intent.status]:
        raise IllegalTransition(detail=f"{intent.status} -> {to}")
    intent.status = to
    intent.updated_at = now
