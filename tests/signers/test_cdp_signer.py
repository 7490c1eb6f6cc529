"""The `cdp` signer, against the CDP stand-in: it has CDP sign the intent's EIP-3009 transfer (and
nothing Paywarden's own check refuses ever reaches CDP), and every way CDP does not sign is a
stable code: CDP's policy refusing (`cdp_policy_refused`), CDP away, failing or out of time
(`cdp_unavailable`, within the call's bound), CDP refusing the request (`cdp_refused`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncIterator

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data

from server.signers.cdp import CdpSigner
from server.signers.cdp_api import CdpAccounts, CdpClientPool, CdpSession
from server.signers.errors import CdpPolicyRefused, CdpRefused, CdpUnavailable, SignRefused
from server.signers.intents import AuthorisedIntent, TransferRequest
from server.wallet_policies.bounds import PaymentBounds
from server.wallet_policies.compiler import compile_account_policy
from server.x402.transfer_authorization import derive_nonce, transfer_typed_data
from tests.support.cdp_standin import CdpStandIn, new_credentials, running_standin
from tests.support.chain import free_port
from tests.support.clocks import frozen_clock, written

pytestmark = pytest.mark.anyio

NETWORK = "eip155:84532"
USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAYEE = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"
NOW = written(2026, 12, 4, 12)
NOW_UNIX = int(NOW.timestamp())
REQUEST = TransferRequest(NETWORK, USDC, PAYEE, 10_000, "USDC", "2")


@dataclasses.dataclass(frozen=True)
class Setup:
    standin: CdpStandIn
    url: str
    address: str


@pytest.fixture(name="cdp")
async def fixture_cdp() -> AsyncIterator[Setup]:
    """An account at the stand-in under a policy that lets it sign up to 0.05 USDC of USDC to PAYEE."""
    with running_standin() as (standin, url):
        accounts = CdpAccounts(standin.credentials, api_url=url)
        bounds = PaymentBounds((USDC.lower(),), 50_000, (PAYEE.lower(),), ())
        held = await accounts.create_policy(
            compile_account_policy(bounds, description="Paywarden policy for agent test"), idempotency_key="t"
        )
        account = await accounts.create_account("pw-signer-test", policy_id=held.id)
        yield Setup(standin, url, account.address)


def _intent(payer: str, *, intent_id: str = "pi_01", amount: int = 10_000) -> AuthorisedIntent:
    return AuthorisedIntent(
        id=intent_id,
        status="authorized",
        network=NETWORK,
        asset=USDC,
        pay_to=PAYEE,
        amount_atomic=amount,
        payer=payer,
        nonce=derive_nonce(intent_id),
        valid_after=NOW_UNIX - 60,
        valid_before=NOW_UNIX + 60,
    )


def _signer(setup: Setup, *, timeout_s: float = 10.0, credentials: object = None) -> CdpSigner:
    session = CdpSession(credentials or setup.standin.credentials, api_url=setup.url, timeout_s=timeout_s)  # type: ignore[arg-type]
    return CdpSigner(session, address=setup.address, usdc_by_network={NETWORK: USDC}, clock=frozen_clock(NOW))


async def test_cdp_signs_the_intents_transfer_with_the_accounts_key(cdp: Setup) -> None:
    signed = await _signer(cdp).sign_payment(_intent(cdp.address), REQUEST)

    typed = transfer_typed_data(
        signed.authorization, domain_name="USDC", domain_version="2", chain_id=84532, verifying_contract=USDC
    )
    assert (
        Account.recover_message(encode_typed_data(full_message=typed), signature=signed.signature)
        == cdp.address
    )
    assert signed.authorization.payer == cdp.address
    assert cdp.standin.count("POST", r"/sign/typed-data$") == 1
    # The same intent again (an answer lost, say): CDP answers the same signature, not a new one.
    again = await _signer(cdp).sign_payment(_intent(cdp.address), REQUEST)
    assert again.signature == signed.signature


async def test_what_paywardens_own_check_refuses_never_reaches_cdp(cdp: Setup) -> None:
    with pytest.raises(SignRefused) as refused:
        await _signer(cdp).sign_payment(_intent(cdp.address), dataclasses.replace(REQUEST, pay_to=USDC))

    assert refused.value.reason == "payee_mismatch"
    assert cdp.standin.count("POST", r"/sign") == 0


async def test_a_payment_the_wallets_policy_refuses_is_cdp_policy_refused(cdp: Setup) -> None:
    larger = _intent(cdp.address, amount=60_000)  # over the 0.05 the account's policy allows

    with pytest.raises(CdpPolicyRefused) as refused:
        await _signer(cdp).sign_payment(larger, dataclasses.replace(REQUEST, amount_atomic=60_000))

    assert refused.value.code == "cdp_policy_refused"
    assert cdp.standin.requests[-1].status == 403


async def test_cdp_down_or_away_is_cdp_unavailable(cdp: Setup) -> None:
    cdp.standin.down = True
    with pytest.raises(CdpUnavailable) as down:
        await _signer(cdp).sign_payment(_intent(cdp.address), REQUEST)
    assert down.value.extra == {"cdpError": "service_unavailable", "httpStatus": 503}

    nobody = dataclasses.replace(cdp, url=f"http://127.0.0.1:{free_port()}/platform")
    with pytest.raises(CdpUnavailable):
        await _signer(nobody).sign_payment(_intent(cdp.address), REQUEST)


async def test_cdp_out_of_time_is_cdp_unavailable_within_the_calls_bound(cdp: Setup) -> None:
    cdp.standin.stall_s = 5.0
    started = time.monotonic()

    with pytest.raises(CdpUnavailable) as late:
        await _signer(cdp, timeout_s=0.5).sign_payment(_intent(cdp.address), REQUEST)

    assert late.value.extra == {"cdpError": "timeout"}
    assert time.monotonic() - started < 4.0  # the bound, not the stand-in's stall, ended it


async def test_credentials_cdp_does_not_know_are_cdp_refused(cdp: Setup) -> None:
    with pytest.raises(CdpRefused) as refused:
        await _signer(cdp, credentials=new_credentials()).sign_payment(_intent(cdp.address), REQUEST)

    assert refused.value.extra == {"cdpError": "unauthorized", "httpStatus": 401}
    assert cdp.standin.count("POST", r"/sign/typed-data$") == 1  # asked, refused at the door


async def test_a_servers_pool_keeps_one_open_client_per_organisation(cdp: Setup) -> None:
    pool = CdpClientPool()
    pooled = CdpSigner(
        CdpSession(cdp.standin.credentials, api_url=cdp.url, pool=pool),
        address=cdp.address,
        usdc_by_network={NETWORK: USDC},
        clock=frozen_clock(NOW),
    )
    try:
        for number in range(3):
            await pooled.sign_payment(_intent(cdp.address, intent_id=f"pi_pool{number}"), REQUEST)
        for number in range(2):
            await _signer(cdp).sign_payment(_intent(cdp.address, intent_id=f"pi_own{number}"), REQUEST)
    finally:
        await pool.aclose()

    ports = [seen.peer_port for seen in cdp.standin.requests if seen.path.endswith("/sign/typed-data")]
    assert len(set(ports[:3])) == 1  # the pool's client, one connection kept open
    assert len(set(ports[3:])) == 2
    assert ports[3] not in ports[:3]
