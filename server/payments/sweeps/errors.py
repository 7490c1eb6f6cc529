"""Why a sweep does not go on: one stable code each, and a sentence that says what to do."""

from __future__ import annotations

from server.kit.errors import PaywardenError


class WalletNotFound(PaywardenError):
    code = "wallet_not_found"
    message = "The agent has no wallet with that id or address."


class WalletNotRetired(PaywardenError):
    code = "wallet_not_retired"
    message = (
        "That wallet is the agent's current wallet: only a retired wallet is swept, into the current "
        "one. Nothing was signed."
    )


class NoRetiredWallet(PaywardenError):
    code = "no_retired_wallet"
    message = "The agent has no retired wallet to sweep: rotate its wallet first."


class WalletAddressInUse(PaywardenError):
    code = "wallet_address_in_use"
    message = (
        "That wallet's address is still the current wallet of another agent (the same key was given "
        "to it), so sweeping it would move that agent's money. Nothing was signed."
    )


class PaymentsStillOpen(PaywardenError):
    code = "payments_still_open"
    message = (
        "Payments from that wallet may still settle, and a sweep would leave them without funds, so "
        "nothing was signed. Run the command again once they have settled or can no longer settle."
    )

    def describe(self) -> str:
        until = self.extra.get("until")
        return self.message if until is None else f"{self.message} The last can settle until {until}."


class SweepNetworkUnavailable(PaywardenError):
    code = "sweep_network_unavailable"
    message = (
        "Sweeping on that network needs its RPC and its USDC address configured "
        "(PAYWARDEN_RPC_URLS and PAYWARDEN_ASSETS)."
    )


class ChainUnavailable(PaywardenError):
    code = "chain_unavailable"
    message = (
        "The network's RPC did not answer. What was done so far is recorded: run the command again "
        "and it carries on from there, without a second transfer."
    )


class TokenDomainUnknown(PaywardenError):
    code = "token_domain_unknown"
    message = (
        "The USDC contract on that network does not declare the EIP-712 domain its signatures use, so "
        "no sweep can be signed for it. Nothing was signed."
    )


class SweepSigningFailed(PaywardenError):
    code = "sweep_signing_failed"
    message = (
        "The retired wallet could not sign the sweep: its key does not open with this master key, or "
        "its signing backend is not available here. Nothing was signed."
    )


class SweepRefusedAtCdp(PaywardenError):
    code = "sweep_refused_at_cdp"
    message = (
        "The retired wallet's own policy at Coinbase CDP refused to sign the sweep, so nothing was "
        "signed or moved, and the sweep is closed. That policy becomes sweep-only after a rotation: "
        "`paywarden admin wallet cdp-policy sync --agent AGENT` sends it now (the wallet policy job "
        "does within a minute); then run the sweep again."
    )


class SweepTransactionRefused(PaywardenError):
    code = "sweep_transaction_refused"
    message = (
        "The network refused the transaction carrying the sweep: the gas account may lack ETH, or the "
        "authorisation no longer applies. Nothing moved. Fund the gas account and run the command "
        "again; an authorisation that lapsed meanwhile is replaced by a new one."
    )

    def describe(self) -> str:
        until = self.extra.get("validBefore")
        return self.message if until is None else f"{self.message} This one lapses at {until}."
