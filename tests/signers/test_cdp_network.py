"""cdp-sdk reports usage and errors to Coinbase's analytics endpoint by default; Paywarden switches
that off, so its requests go to the configured CDP API and nowhere else. The socket layer is
watched (every name looked up, every connection made) while every call Paywarden makes runs, the
ones that fail too (the SDK reports errors, and it is errors that would leave)."""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

import anyio
import pytest

from server.signers.cdp import CdpSigner
from server.signers.cdp_api import TELEMETRY_SWITCHES, CdpAccounts, CdpSession
from server.signers.errors import CdpError
from server.signers.intents import AuthorisedIntent, TransferRequest
from server.wallet_policies.bounds import PaymentBounds
from server.wallet_policies.compiler import compile_account_policy
from server.x402.transfer_authorization import derive_nonce
from tests.support.cdp_standin import new_credentials, running_standin
from tests.support.chain import free_port
from tests.support.clocks import frozen_clock, written
from tests.support.socket_guard import SocketRecorder

pytestmark = pytest.mark.anyio

NETWORK = "eip155:84532"
USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAYEE = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
NOW = written(2026, 12, 4, 12)
ANALYTICS_HOST = "cca-lite.coinbase.com"


def _intent(payer: str, amount: int) -> AuthorisedIntent:
    now = int(NOW.timestamp())
    return AuthorisedIntent(
        "pi_net",
        "authorized",
        NETWORK,
        USDC,
        PAYEE,
        amount,
        payer,
        derive_nonce("pi_net"),
        now - 60,
        now + 60,
    )


async def test_no_request_leaves_for_anything_but_the_configured_api(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = f"http://127.0.0.1:{free_port()}/platform"
    with running_standin() as (standin, url):
        recorder = SocketRecorder().install(monkeypatch)
        accounts = CdpAccounts(standin.credentials, api_url=url)
        assert await accounts.account_named("pw-net") is None  # a 404
        bounds = PaymentBounds((USDC.lower(),), 20_000, None, ())
        held = await accounts.create_policy(
            compile_account_policy(bounds, description="Net test"), idempotency_key="n"
        )
        account = await accounts.create_account("pw-net", policy_id=held.id)
        await accounts.replace_rules(held.id, compile_account_policy(bounds, description="Net test"))
        signer = CdpSigner(
            CdpSession(standin.credentials, api_url=url),
            address=account.address,
            usdc_by_network={NETWORK: USDC},
            clock=frozen_clock(NOW),
        )
        request = TransferRequest(NETWORK, USDC, PAYEE, 10_000, "USDC", "2")
        await signer.sign_payment(_intent(account.address, 10_000), request)
        failures = 0
        for call in (
            # CDP's policy refusing, a request CDP refuses, CDP down, and nobody listening.
            signer.sign_payment(
                _intent(account.address, 30_000), dataclasses.replace(request, amount_atomic=30_000)
            ),
            CdpAccounts(new_credentials(), api_url=url).account_named("pw-net"),
            CdpAccounts(standin.credentials, api_url=closed).account_named("pw-net"),
        ):
            try:
                await call
            except CdpError:
                failures += 1
        standin.down = True
        try:
            await accounts.policy(held.id)
        except CdpError:
            failures += 1
        await anyio.sleep(0.5)  # anything the SDK scheduled on the loop would have run by now

    assert failures == 4
    assert recorder.name_lookups == []
    allowed = {("127.0.0.1", urlsplit(url).port), ("127.0.0.1", urlsplit(closed).port)}
    assert set(recorder.connects) <= allowed
    assert ("127.0.0.1", urlsplit(url).port) in recorder.connects


async def test_without_the_switches_the_sdk_would_report_to_coinbase(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch above would see it: the SDK's own reporting, switched back on, looks up Coinbase's
    analytics host at once."""
    from cdp.analytics import track_action, track_error

    recorder = SocketRecorder().install(monkeypatch)
    for name in TELEMETRY_SWITCHES:
        monkeypatch.delenv(name)

    track_action(action="sign_typed_data")
    track_error(RuntimeError("a failure the SDK reports"), "sign_typed_data")
    await anyio.sleep(1.0)  # the SDK sends from tasks it scheduled on this loop

    assert recorder.name_lookups.count(ANALYTICS_HOST) >= 2
