"""Why a signer refuses: one stable code, `sign_refused`, and a closed set of reasons."""

from __future__ import annotations

from enum import StrEnum

from server.kit.errors import PaywardenError


class SignerError(Exception):
    """The signer could not produce a signature; nothing was signed."""


class RefusalReason(StrEnum):
    """What did not match: the payment asked for is not the one the ledger authorised."""

    INTENT_NOT_AUTHORISED = "intent_not_authorised"  # not in the state the ledger signs from
    NONCE_NOT_DERIVED = "nonce_not_derived"  # not the nonce derived from the intent's id
    NETWORK_MISMATCH = "network_mismatch"  # the offer's network is not the intent's
    NETWORK_NOT_CONFIGURED = "network_not_configured"  # no USDC configured for the network
    ASSET_NOT_USDC = "asset_not_usdc"  # the token (verifying contract) is not the network's USDC
    AMOUNT_MISMATCH = "amount_mismatch"  # not the intent's amount, or not a positive amount
    PAYEE_MISMATCH = "payee_mismatch"  # not the intent's payee
    PAYER_MISMATCH = "payer_mismatch"  # the intent pays from another wallet
    WINDOW_TOO_LONG = "window_too_long"  # validBefore - validAfter over 300 seconds
    WINDOW_IN_PAST = "window_in_past"  # validAfter further back than the clock-skew allowance
    WINDOW_ENDED = "window_ended"  # validBefore already passed
    SWEEP_NOT_TO_CURRENT_WALLET = "sweep_not_to_current_wallet"  # a sweep paying another address
    SWEEP_OF_CURRENT_WALLET = "sweep_of_current_wallet"  # the wallet swept is the agent's current one


class SignRefused(PaywardenError):
    code = "sign_refused"
    message = (
        "The wallet refused to sign: the payment is not the one the ledger authorised, "
        "so nothing was signed or paid."
    )

    def __init__(self, reason: RefusalReason, **extra: object) -> None:
        self.reason = reason
        super().__init__(reason=str(reason), **extra)


class InvalidCdpCredentials(PaywardenError):
    code = "invalid_cdp_credentials"
    message = (
        "The CDP credentials are not usable: give the API key id, the API key secret (an Ed25519 "
        "key in base64, or an EC key in PEM) and the wallet secret (base64), as CDP shows them."
    )


class CdpError(PaywardenError):
    """Coinbase CDP, which holds a `cdp` wallet's key, did not sign: nothing was signed."""


class CdpPolicyRefused(CdpError):
    code = "cdp_policy_refused"
    message = (
        "The wallet's own policy at Coinbase CDP refused to sign this payment, so nothing was signed "
        "or paid. The agent's page says whether that policy is in step with the agent's."
    )


class CdpUnavailable(CdpError):
    code = "cdp_unavailable"
    message = (
        "Coinbase CDP, which holds this wallet's key, could not be reached or did not answer in time, "
        "so nothing was signed or paid. Try again later."
    )


class CdpRefused(CdpError):
    code = "cdp_refused"
    message = (
        "Coinbase CDP refused the request (its credentials, the account or the request itself), so "
        "nothing was signed or paid. `cdpError` names CDP's reason."
    )
