"""The one check between a payment intent and a signature, and the typed data it allows.

Refused (SignRefused, with the first reason that applies): an intent not in `authorized` (the
state the ledger leaves it in just before signing: the purchase marks it `submitted` only once the
signature exists), a nonce other than the one derived from the intent's id, another network than
the intent's or one without configured USDC, a token other than that network's USDC, an amount or
payee other than the intent's, another payer than the signer, a sweep paying anyone but the
agent's current wallet or sweeping that wallet itself, and a validity window over 300 seconds,
starting further back than the clock-skew allowance (plus the few seconds between the reservation
and the signature), or already over.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server.signers.errors import RefusalReason, SignRefused
from server.signers.intents import AuthorisedIntent, IntentKind, TransferRequest
from server.vocabulary import IntentStatus
from server.x402.transfer_authorization import (
    CLOCK_SKEW_SECONDS,
    MAX_WINDOW_SECONDS,
    TransferAuthorization,
    derive_nonce,
    transfer_typed_data,
)

# How long after its reservation (which sets the window) an intent may still be signed. The
# purchase signs right after the reservation's transaction; this only absorbs a slow database.
SIGNING_DELAY_SECONDS = 30


def _same_address(a: str, b: str) -> bool:
    return a.lower() == b.lower()


def _chain_id(network: str) -> int | None:
    namespace, _, reference = network.partition(":")
    if namespace != "eip155" or not reference.isdigit():
        return None
    return int(reference)


def refusal(
    intent: AuthorisedIntent,
    request: TransferRequest,
    *,
    payer: str,
    usdc_by_network: Mapping[str, str],
    now_unix: int,
) -> RefusalReason | None:
    """The first reason to refuse signing `request` for `intent`, or None when it is authorised."""
    if intent.status != IntentStatus.AUTHORIZED:
        return RefusalReason.INTENT_NOT_AUTHORISED
    if intent.nonce.lower() != derive_nonce(intent.id):
        return RefusalReason.NONCE_NOT_DERIVED
    if request.network != intent.network:
        return RefusalReason.NETWORK_MISMATCH
    usdc = usdc_by_network.get(intent.network)
    if usdc is None or _chain_id(intent.network) is None:
        return RefusalReason.NETWORK_NOT_CONFIGURED
    if not (_same_address(request.asset, usdc) and _same_address(intent.asset, usdc)):
        return RefusalReason.ASSET_NOT_USDC
    if request.amount_atomic != intent.amount_atomic or intent.amount_atomic <= 0:
        return RefusalReason.AMOUNT_MISMATCH
    if not _same_address(request.pay_to, intent.pay_to):
        return RefusalReason.PAYEE_MISMATCH
    if not _same_address(payer, intent.payer):
        return RefusalReason.PAYER_MISMATCH
    if intent.kind == IntentKind.SWEEP:
        current = intent.current_wallet
        if current is not None and _same_address(payer, current):
            return RefusalReason.SWEEP_OF_CURRENT_WALLET
        if current is None or not _same_address(intent.pay_to, current):
            return RefusalReason.SWEEP_NOT_TO_CURRENT_WALLET
    if intent.valid_before - intent.valid_after > MAX_WINDOW_SECONDS:
        return RefusalReason.WINDOW_TOO_LONG
    if intent.valid_before <= now_unix:
        return RefusalReason.WINDOW_ENDED
    if intent.valid_after < now_unix - CLOCK_SKEW_SECONDS - SIGNING_DELAY_SECONDS:
        return RefusalReason.WINDOW_IN_PAST
    return None


def authorised_transfer(
    intent: AuthorisedIntent,
    request: TransferRequest,
    *,
    payer: str,
    usdc_by_network: Mapping[str, str],
    now_unix: int,
) -> tuple[TransferAuthorization, dict[str, Any]]:
    """The EIP-3009 authorisation for `intent` and its typed data, or SignRefused."""
    reason = refusal(intent, request, payer=payer, usdc_by_network=usdc_by_network, now_unix=now_unix)
    if reason is not None:
        raise SignRefused(reason, intentId=intent.id)
    chain_id = _chain_id(intent.network)
    assert chain_id is not None  # refusal() checked it
    authorization = TransferAuthorization(
        payer=payer,
        pay_to=intent.pay_to,
        value=intent.amount_atomic,
        valid_after=intent.valid_after,
        valid_before=intent.valid_before,
        nonce=derive_nonce(intent.id),
    )
    typed = transfer_typed_data(
        authorization,
        domain_name=request.domain_name,
        domain_version=request.domain_version,
        chain_id=chain_id,
        verifying_contract=usdc_by_network[intent.network],
    )
    return authorization, typed
