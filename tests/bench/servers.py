"""What benchmarks run against: real `paywarden serve` processes (so the server has its own
interpreter and GIL and is measured from outside, as a client would see it), and Coinbase's x402
SDK buyer for the bare exchange."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_account import Account
from x402 import x402Client
from x402.http.clients import x402HttpxClient
from x402.mechanisms.evm import EthAccountSigner
from x402.mechanisms.evm.exact import register_exact_evm_client

from server.settings import Settings
from tests.support.paywarden import chain_environ, settings_for
from tests.support.processes import ServeProcess, serve_processes

# Four servers of two connections each at most stay well under PostgreSQL's max_connections while
# other runs share the database server; single servers keep the default pool.
POOL_SIZE_MANY = "4"
NETWORK = "eip155:84532"


@dataclass(frozen=True)
class Served:
    public_url: str
    processes: list[ServeProcess]
    settings: Settings  # what tokens for these servers are issued against (audience: the public URL)

    @property
    def mcp_url(self) -> str:
        return self.processes[0].mcp_url


@contextmanager
def paywarden(
    database_url: str,
    workdir: Path,
    *,
    extra: Mapping[str, str] | None = None,
    count: int = 1,
    workers: int = 1,
) -> Iterator[Served]:
    extra = dict(extra or {})
    if count > 1:
        extra.setdefault("PAYWARDEN_DATABASE_POOL_SIZE", POOL_SIZE_MANY)
    workdir.mkdir(parents=True, exist_ok=True)
    with serve_processes(count, database_url=database_url, extra=extra, workdir=workdir, workers=workers) as (
        public_url,
        processes,
    ):
        port = int(public_url.rsplit(":", 1)[1])
        yield Served(public_url, processes, settings_for(database_url=database_url, port=port, extra=extra))


def chain(anvil: Any, token_address: str, *, rpc_url: str | None = None) -> dict[str, str]:
    return chain_environ(rpc_url=rpc_url or anvil.rpc_url, token_address=token_address)


def fresh_block(anvil: Any) -> None:
    """Mine a block: anvil mines only on demand, and an authorisation is valid from a minute back."""
    anvil.w3.provider.make_request("evm_mine", [])


def sdk_client(private_key: str, token_address: str, *, timeout_s: float = 60) -> x402HttpxClient:
    """Coinbase's x402 SDK buyer: its httpx client, paying the test token (spend controls allow it:
    the SDK pays only the real USDC addresses it knows unless an asset is allowed explicitly)."""
    buyer = x402Client()
    register_exact_evm_client(buyer, EthAccountSigner(Account.from_key(private_key)), networks=NETWORK)
    buyer.set_spend_controls(
        {
            "allowed_assets": [
                {"network": NETWORK, "asset": token_address, "max_amount_per_payment": "1000000"}
            ]
        }
    )
    return x402HttpxClient(buyer, timeout=timeout_s)
