"""What the sweep tests share: an agent whose funded wallet was rotated away, a gas account, the
commands an operator runs, and the chain's own count of the transfers out of a wallet."""

from __future__ import annotations

from dataclasses import dataclass

from eth_account import Account
from web3 import Web3

from server.chain.evidence import TRANSFER_TOPIC, address_topic
from server.kit.db import Database
from server.settings import Settings
from tests.support.chain import Anvil, TestToken, fresh_wallet, private_key_hex
from tests.support.cli import CliResult, run_cli
from tests.support.paywarden import chain_environ, settings_for
from tests.support.tenants import AgentSetup, make_agent

NETWORK = "eip155:84532"


@dataclass(frozen=True)
class RotatedAgent:
    """An agent whose first wallet (funded) was rotated to a new one (empty)."""

    setup: AgentSetup
    old_wallet_id: str
    old: str  # the retired wallet's address
    new: str  # the current wallet's address
    funded_atomic: int


@dataclass(frozen=True)
class SweepChain:
    """The chain the commands are pointed at: anvil, or a proxy in front of it."""

    anvil: Anvil
    token: TestToken
    rpc_url: str

    def environ(self, *, confirmations: int = 0) -> dict[str, str]:
        return chain_environ(
            rpc_url=self.rpc_url, token_address=self.token.address, confirmations=confirmations
        )

    def settings(self, db: Database) -> Settings:
        return settings_for(database_url=db.url, port=8402, extra=self.environ())

    def through(self, rpc_url: str) -> SweepChain:
        return SweepChain(self.anvil, self.token, rpc_url)

    def transfers(self, frm: str, to: str) -> list[str]:
        """The transactions that moved the token from `frm` to `to`, as the chain's logs say."""
        logs = self.anvil.w3.eth.get_logs(
            {
                "address": Web3.to_checksum_address(self.token.address),
                "fromBlock": 0,
                "toBlock": "latest",
                "topics": [TRANSFER_TOPIC, address_topic(frm), address_topic(to)],
            }
        )
        return ["0x" + bytes(log["transactionHash"]).hex() for log in logs]

    def transfers_out(self, frm: str) -> list[str]:
        logs = self.anvil.w3.eth.get_logs(
            {
                "address": Web3.to_checksum_address(self.token.address),
                "fromBlock": 0,
                "toBlock": "latest",
                "topics": [TRANSFER_TOPIC, address_topic(frm)],
            }
        )
        return ["0x" + bytes(log["transactionHash"]).hex() for log in logs]


def gas_account(anvil: Anvil) -> str:
    """A new account holding 1 ETH for gas (and nothing else): its private key."""
    address, key = fresh_wallet()
    anvil.w3.provider.make_request("anvil_setBalance", [address, hex(10**18)])  # type: ignore[arg-type]
    return key


def wallet_command(
    db: Database, chain: SweepChain, *args: str, env: dict[str, str] | None = None
) -> CliResult:
    """`paywarden admin wallet ...` in this process, pointed at `chain`."""
    return run_cli(db.url, "admin", "wallet", *args, env={**chain.environ(), **(env or {})})


@dataclass(frozen=True)
class FundedAgent:
    setup: AgentSetup
    address: str  # its wallet's
    funded_atomic: int


def funded_agent(
    db: Database,
    chain: SweepChain,
    *,
    funded_atomic: int = 10_000_000,
    org_id: str | None = None,
    name: str = "agent",
) -> FundedAgent:
    """An agent (in a new organisation unless `org_id`) whose wallet holds `funded_atomic` of the token."""
    account = Account.create()
    chain.token.mint(account.address, funded_atomic)
    setup = make_agent(
        db,
        chain.settings(db),
        allow_hosts=["127.0.0.1"],
        wallet_key=private_key_hex(account.key),
        org_id=org_id,
        name=name,
    )
    return FundedAgent(setup, account.address, funded_atomic)


def rotate(db: Database, chain: SweepChain, funded: FundedAgent) -> RotatedAgent:
    """`paywarden admin wallet rotate`, to a key Paywarden makes."""
    rotated = wallet_command(db, chain, "rotate", "--agent", funded.setup.agent_id, "--json").json()
    assert rotated["retiredAddress"] == funded.address
    return RotatedAgent(
        funded.setup, rotated["retiredWalletId"], funded.address, rotated["address"], funded.funded_atomic
    )


def rotated_agent(
    db: Database,
    chain: SweepChain,
    *,
    funded_atomic: int = 10_000_000,
    org_id: str | None = None,
    name: str = "agent",
) -> RotatedAgent:
    """An agent given a funded wallet, then rotated to a new key, as an operator does it."""
    return rotate(db, chain, funded_agent(db, chain, funded_atomic=funded_atomic, org_id=org_id, name=name))


def sweep_with_gas(
    db: Database, chain: SweepChain, agent_id: str, *options: str, env: dict[str, str] | None = None
) -> CliResult:
    """`paywarden admin wallet sweep --agent A`, its gas paid by a new funded account."""
    gas = {"SWEEP_GAS_KEY": gas_account(chain.anvil), **(env or {})}
    return wallet_command(
        db, chain, "sweep", "--agent", agent_id, "--gas-from-env", "SWEEP_GAS_KEY", *options, env=gas
    )
