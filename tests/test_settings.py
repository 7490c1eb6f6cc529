"""Configuration added with this issue is validated at start-up like the rest."""

from __future__ import annotations

import pytest

from server.settings import ConfigError, load_settings
from tests.support.paywarden import TEST_MASTER_KEY


def test_the_database_pool_size_is_bounded() -> None:
    base = {"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY}
    assert load_settings(environ=base).database_pool_size == 10
    assert load_settings(environ={**base, "PAYWARDEN_DATABASE_POOL_SIZE": "4"}).database_pool_size == 4
    for bad in ("0", "101", "many"):
        with pytest.raises(ConfigError, match="PAYWARDEN_DATABASE_POOL_SIZE"):
            load_settings(environ={**base, "PAYWARDEN_DATABASE_POOL_SIZE": bad})
