"""Signing uses secp256k1 in C (coincurve, a dependency): eth-keys picks it when it is installed, and
falls back to pure Python, several times slower on every paid call, without a word."""

from __future__ import annotations

from eth_keys.backends import get_default_backend_class


def test_signatures_are_made_by_the_c_backend() -> None:
    assert get_default_backend_class() == "eth_keys.backends.CoinCurveECCBackend"
