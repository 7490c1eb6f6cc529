"""Networks by the name a person knows them by: `eip155:84532` is Base Sepolia.

Pages, messages and the CLI's human output say the name; the CAIP-2 id stays in JSON answers and
next to the name where the exact id matters (the approval page)."""

from __future__ import annotations

NAMES = {
    "eip155:8453": "Base",
    "eip155:84532": "Base Sepolia",
    # anvil's chain id: a chain on this machine, with test money only.
    "eip155:31337": "Local test chain",
}
TESTNETS = frozenset({"eip155:84532", "eip155:31337"})


def network_name(network: str) -> str:
    """The network's name, or the id itself for one without a name here."""
    return NAMES.get(network, network)


def is_testnet(network: str) -> bool:
    return network in TESTNETS
