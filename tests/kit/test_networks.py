from __future__ import annotations

import pytest

from server.kit.networks import is_testnet, network_name
from server.web.pages.common import TEMPLATES


@pytest.mark.parametrize(
    ("network", "name"),
    [
        ("eip155:84532", "Base Sepolia"),
        ("eip155:8453", "Base"),
        ("eip155:31337", "Local test chain"),
        ("eip155:1", "eip155:1"),
    ],
)
def test_a_network_is_named(network: str, name: str) -> None:
    assert network_name(network) == name


def test_test_networks_are_known() -> None:
    assert is_testnet("eip155:84532")
    assert is_testnet("eip155:31337")
    assert not is_testnet("eip155:8453")


def test_templates_name_networks() -> None:
    template = TEMPLATES.env.from_string("{{ network|network_name }}")
    assert template.render(network="eip155:84532") == "Base Sepolia"
