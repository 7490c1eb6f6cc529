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


# Where a person looks a transaction up; a local test chain has no explorer.
EXPLORERS = {
    "eip155:8453": "https://basescan.org",
    "eip155:84532": "https://sepolia.basescan.org",
}


def transaction_url(network: str, tx_hash: str | None) -> str | None:
    """The block explorer's page of a transaction, or None (no hash yet, or no explorer)."""
    explorer = EXPLORERS.get(network)
    if explorer is None or not tx_hash:
        return None
    return f"{explorer}/tx/{tx_hash}"


def address_url(network: str, address: str) -> str | None:
    explorer = EXPLORERS.get(network)
    return None if explorer is None else f"{explorer}/address/{address}"
