"""Money: atomic USDC units as Python ints, USD as Decimal, decimal strings on the wire.

USDC has 6 decimals and Paywarden treats 1 USDC as 1 USD. Floats never touch an amount: a number
that arrives as a JSON float is read through its shortest decimal spelling.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

USDC_DECIMALS = 6
ATOMIC_PER_USD = 10**USDC_DECIMALS
# No single configured amount may exceed this many USD: keeps sums far inside 64-bit integers.
MAX_USD = Decimal(1_000_000_000)


class AmountError(ValueError):
    """An amount that is not a finite, non-negative USD value with at most 6 decimals."""


def parse_usd(value: object) -> Decimal:
    """Read a USD amount given as a decimal string or a JSON number."""
    if isinstance(value, bool) or value is None:
        raise AmountError("not a number")
    if isinstance(value, float):
        text = repr(value)
    elif isinstance(value, int | str | Decimal):
        text = str(value).strip()
    else:
        raise AmountError("not a number")
    if not text or len(text) > 40:
        raise AmountError("not a number")
    try:
        amount = Decimal(text)
    except InvalidOperation as exc:
        raise AmountError("not a number") from exc
    if not amount.is_finite():
        raise AmountError("not finite")
    if amount < 0:
        raise AmountError("negative")
    if amount > MAX_USD:
        raise AmountError("too large")
    exponent = amount.normalize().as_tuple().exponent
    if isinstance(exponent, int) and exponent < -USDC_DECIMALS:
        raise AmountError("more than 6 decimals")
    return amount


def usd_to_atomic(amount: Decimal) -> int:
    scaled = amount * ATOMIC_PER_USD
    if scaled != scaled.to_integral_value():
        raise AmountError("more than 6 decimals")
    return int(scaled)


def atomic_to_usd(atomic: int | Decimal) -> Decimal:
    return Decimal(atomic) / Decimal(ATOMIC_PER_USD)


def format_usd(amount: Decimal | int, *, atomic: bool = False) -> str:
    """`10000` atomic -> "0.01"; `7000` -> "0.007"; `1_000_000` -> "1.00". At least 2 decimals."""
    value = atomic_to_usd(amount) if atomic else Decimal(amount)
    text = format(value.normalize(), "f")
    whole, _, frac = text.partition(".")
    frac = frac.rstrip("0")
    if len(frac) < 2:
        frac = frac.ljust(2, "0")
    return f"{whole}.{frac}"


def parse_atomic(text: object) -> int:
    """A whole, positive amount of atomic units as an x402 challenge spells it: digits only."""
    if not isinstance(text, str) or not text.isascii() or not text.isdigit() or len(text) > 78:
        raise AmountError("not a whole amount")
    value = int(text)
    if value <= 0:
        raise AmountError("not positive")
    return value
