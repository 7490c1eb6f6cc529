"""What a `cdp` wallet's signature costs Paywarden itself, against an imported key, in one process.

Both sign the same intents; the `cdp` signer asks the CDP stand-in over loopback HTTP (which signs
with eth-account as the local signer does), once through a server's pool of open clients and once
with a client per call. The difference is Paywarden's and cdp-sdk's own cost (a client's trust
store, a connection, two JWTs, the SDK's models); CDP's own time and the network to it come on top
in production. Also: what importing cdp-sdk costs, against what a server's start loads.
See docs/performance.md.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

import pytest

from server.kit.clock import SystemClock
from server.signers.base import PaymentSigner
from server.signers.cdp import CdpSigner
from server.signers.cdp_api import CdpClientPool, CdpSession
from server.signers.intents import AuthorisedIntent, TransferRequest
from server.signers.local_key import LocalKeySigner
from server.x402.transfer_authorization import derive_nonce
from tests.bench.harness import setting
from tests.support.cdp_standin import running_standin

NETWORK = "eip155:84532"
USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAYEE = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
REQUEST = TransferRequest(NETWORK, USDC, PAYEE, 10_000, "USDC", "2")


def _intent(signer: PaymentSigner, number: int) -> AuthorisedIntent:
    now = int(time.time())
    intent_id = f"pi_bench_{signer.mode}_{id(signer)}_{number}"
    return AuthorisedIntent(
        intent_id,
        "authorized",
        NETWORK,
        USDC,
        PAYEE,
        10_000,
        signer.address,
        derive_nonce(intent_id),
        now - 60,
        now + 60,
    )


async def _per_signature_ms(signer: PaymentSigner, calls: int) -> float:
    for number in range(5):  # warm up: the SDK's first use, a first connection
        await signer.sign_payment(_intent(signer, -1 - number), REQUEST)
    started = time.perf_counter()
    for number in range(calls):
        await signer.sign_payment(_intent(signer, number), REQUEST)
    return (time.perf_counter() - started) * 1000 / calls


def _cpu_seconds(code: str, *, after: str = "pass") -> float:
    """The CPU a fresh process spends on `code`, once `after` ran."""
    probe = f"import time;{after};t=time.process_time();{code};print(time.process_time()-t)"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return float(done.stdout.strip())


@pytest.mark.timeout(300)
def test_a_cdp_signature_against_an_imported_keys() -> None:
    calls = setting("CDP_SIGNATURES", 100, 20)

    async def main(url: str, standin: object) -> tuple[float, float, float]:
        from cdp import CdpClient

        credentials = standin.credentials  # type: ignore[attr-defined]
        async with CdpClient(
            api_key_id=credentials.api_key_id,
            api_key_secret=credentials.api_key_secret,
            wallet_secret=credentials.wallet_secret,
            base_path=url,
        ) as cdp:
            address = (await cdp.evm.create_account(name="pw-bench")).address
        pool = CdpClientPool()

        def cdp_signer(session: CdpSession) -> CdpSigner:
            return CdpSigner(session, address=address, usdc_by_network={NETWORK: USDC}, clock=SystemClock())

        local = LocalKeySigner(b"\x11" * 32, usdc_by_network={NETWORK: USDC}, clock=SystemClock())
        measures: list[Callable[[], Awaitable[float]]] = [
            lambda: _per_signature_ms(local, calls),
            lambda: _per_signature_ms(cdp_signer(CdpSession(credentials, api_url=url, pool=pool)), calls),
            lambda: _per_signature_ms(cdp_signer(CdpSession(credentials, api_url=url)), calls),
        ]
        local_ms, pooled_ms, unpooled_ms = [await measure() for measure in measures]
        await pool.aclose()
        return local_ms, pooled_ms, unpooled_ms

    with running_standin() as (standin, url):
        local_ms, pooled_ms, unpooled_ms = asyncio.run(main(url, standin))
    server_s = _cpu_seconds("import server.app")
    sdk_s = _cpu_seconds("import cdp", after="import server.app")
    print(
        f"\nper signature: imported key {local_ms:.2f} ms; cdp through the pool {pooled_ms:.1f} ms "
        f"(x{pooled_ms / local_ms:.0f}); cdp with a client per call {unpooled_ms:.1f} ms "
        f"(x{unpooled_ms / pooled_ms:.1f} the pool's)\n"
        f"importing cdp-sdk after server.app: {sdk_s:.2f} s of CPU (the import of server.app "
        f"measured alike: {server_s:.2f} s)"
    )
    assert pooled_ms < unpooled_ms
