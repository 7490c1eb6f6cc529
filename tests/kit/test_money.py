"""Amounts: integers of atomic units, USD as decimal strings, never floats."""

from __future__ import annotations

from decimal import Decimal

import pytest

from server.kit.money import AmountError, format_usd, parse_atomic, parse_usd, usd_to_atomic


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.05", Decimal("0.05")),
        ("1", Decimal(1)),
        (0.1, Decimal("0.1")),
        (2, Decimal(2)),
        ("0.000001", Decimal("0.000001")),
    ],
)
def test_parse_usd_reads_strings_and_json_numbers_exactly(value: object, expected: Decimal) -> None:
    assert parse_usd(value) == expected


def test_a_json_float_is_read_through_its_decimal_spelling_not_its_binary_value() -> None:
    # 0.1 as a binary float is 0.1000000000000000055...; the decimal we mean is exactly 0.1.
    assert parse_usd(0.1) * 10 == Decimal(1)


@pytest.mark.parametrize(
    "value", ["-1", "abc", "", "NaN", "Infinity", "0.0000001", "1e400", None, True, [], "1000000001", " "]
)
def test_parse_usd_refuses_what_is_not_an_amount(value: object) -> None:
    with pytest.raises(AmountError):
        parse_usd(value)


def test_usd_to_atomic_is_exact() -> None:
    assert usd_to_atomic(Decimal("0.01")) == 10_000
    assert usd_to_atomic(Decimal("123.456789")) == 123_456_789
    with pytest.raises(AmountError):
        usd_to_atomic(Decimal("0.0000001"))


@pytest.mark.parametrize(
    ("atomic", "text"),
    [(10_000, "0.01"), (7_000, "0.007"), (1_000_000, "1.00"), (1, "0.000001"), (0, "0.00")],
)
def test_format_usd_keeps_two_decimals_at_least(atomic: int, text: str) -> None:
    assert format_usd(atomic, atomic=True) == text


@pytest.mark.parametrize("text", ["10000", "1", "999999999999999999999"])
def test_parse_atomic_accepts_whole_positive_amounts(text: str) -> None:
    assert parse_atomic(text) == int(text)


@pytest.mark.parametrize("text", ["0", "-1", "1.5", "1e4", " 1", "0x10", "١٢", 10000, None, ""])
def test_parse_atomic_refuses_anything_else(text: object) -> None:
    with pytest.raises(AmountError):
        parse_atomic(text)
