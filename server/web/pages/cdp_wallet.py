"""What the agent's page says of a `cdp` wallet: which account at CDP holds the key, whether the
account's own policy there is the one compiled from the agent's policy now (as Paywarden last sent
it, and as CDP holds it, checked while the page is drawn, within 3 seconds)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import anyio

from server.signers.errors import CdpError, SignerError
from server.wallet_policies.service import Drift
from server.wallet_policies.sync import CdpReach, WalletPolicyWork, drift_of
from server.wallets.cdp import CdpNotConnected

CHECK_TIMEOUT_S = 3.0

# Why the wallet's policy could not be sent, in words (the codes the wallet row records).
FAILURE_WORDS = {
    "cdp_unavailable": "CDP could not be reached or did not answer in time",
    "cdp_refused": (
        "CDP refused the request: check the organisation's CDP credentials, and that its API key may "
        "manage policies"
    ),
    "cdp_policy_refused": "CDP's policy refused the request",
    "cdp_not_connected": "the organisation has no CDP credentials",
    "cdp_credentials_unreadable": (
        "the organisation's CDP credentials do not open with this server's master key"
    ),
}


@dataclass(frozen=True)
class CdpWalletView:
    account_name: str | None
    sent: str  # what Paywarden last sent, in a sentence
    sent_ok: bool  # False while the policy compiled now is not the one CDP took (or failed)
    drift: Drift | None  # None when CDP could not be asked now
    unchecked: str | None  # why not, when it could not


def _at(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M} UTC"


def sent_state(work: WalletPolicyWork) -> tuple[str, bool]:
    wallet, compiled = work.wallet, work.compiled
    if wallet.cdp_policy_error is not None:
        reason = FAILURE_WORDS.get(wallet.cdp_policy_error, wallet.cdp_policy_error)
        return (
            f"Policy version {compiled.version} could not be sent to CDP ({reason}); Paywarden tries "
            f"again at {_at(wallet.cdp_policy_retry_at)}. Until then CDP applies the policy it last took.",
            False,
        )
    if wallet.cdp_policy_digest != compiled.digest:
        return (
            f"Policy version {compiled.version} is not at CDP yet: Paywarden sends it within a minute. "
            "Until then CDP applies the policy it last took.",
            False,
        )
    return (
        f"Paywarden sent the policy compiled from version {wallet.cdp_policy_version} at "
        f"{_at(wallet.cdp_policy_synced_at)}, and has nothing newer to send.",
        True,
    )


async def cdp_wallet_view(work: WalletPolicyWork, *, reach: CdpReach) -> CdpWalletView:
    """The wallet's facts, with what CDP holds checked now (a failure or silence is said, never raised)."""
    sent, sent_ok = sent_state(work)
    drift: Drift | None = None
    unchecked: str | None = "CDP did not answer within 3 seconds."
    with anyio.move_on_after(CHECK_TIMEOUT_S):
        try:
            drift = await drift_of(work, reach=reach)
            unchecked = None
        except CdpNotConnected:
            unchecked = "The organisation has no CDP credentials."
        except (CdpError, SignerError) as exc:
            unchecked = f"CDP could not be asked ({getattr(exc, 'code', 'signer_error')})."
    return CdpWalletView(work.wallet.account_name, sent, sent_ok, drift, unchecked)
