"""The CDP stand-in holds itself to what CDP documents: requests are authenticated as cdp-sdk
authenticates them (a bearer JWT for the request by the API key it was given; a wallet JWT over the
body where the SDK sends one, used once), accounts sign with keys of their own, and the Policy
Engine decides first-match, default-reject, project policy before the account's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cdp import CdpClient
from cdp.auth.utils.jwt import JwtOptions, WalletJwtOptions, generate_jwt, generate_wallet_jwt
from cdp.policies.types import CreatePolicyOptions, SignEvmHashRule
from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data

from server.signers.cdp_credentials import CdpCredentials
from tests.support.cdp_standin import CdpStandIn, StoredPolicy, evaluate, new_credentials, running_standin

pytestmark = pytest.mark.anyio

TYPES = {
    "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "verifyingContract", "type": "address"}],
    "Permit": [{"name": "to", "type": "address"}, {"name": "value", "type": "uint256"}],
}
CONTRACT = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAYEE = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C"


def _typed(value: int, *, contract: str = CONTRACT, types: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "types": types or TYPES,
        "primaryType": "Permit",
        "domain": {"name": "Token", "verifyingContract": contract},
        "message": {"to": PAYEE, "value": str(value)},
    }


def _fields(operator: str, value: int) -> dict[str, Any]:
    return {
        "type": "evmTypedDataField",
        "types": {"types": {"Permit": TYPES["Permit"]}, "primaryType": "Permit"},
        "conditions": [{"path": "value", "operator": operator, "value": str(value)}],
    }


def _policy(*rules: dict[str, Any], scope: str = "account", status: str = "active") -> StoredPolicy:
    return StoredPolicy("p", scope, None, list(rules), "t", "t", status=status)


def _rule(action: str, *criteria: dict[str, Any], operation: str = "signEvmTypedData") -> dict[str, Any]:
    return {"action": action, "operation": operation, "criteria": list(criteria)}


# -- the Policy Engine, as a table --------------------------------------------------------------


def test_the_first_matching_rule_decides_and_no_match_refuses() -> None:
    cap = _policy(_rule("reject", _fields(">", 10)), _rule("accept", _fields("<=", 100)))

    assert evaluate([cap], "signEvmTypedData", _typed(5)) == "accept"
    assert evaluate([cap], "signEvmTypedData", _typed(50)) == "reject"  # the reject came first
    assert evaluate([cap], "signEvmTypedData", _typed(500)) == "reject"  # no rule matched
    # Rules of another operation never match; nothing else does either, so CDP refuses.
    assert evaluate([cap], "signEvmHash", {"hash": "0x" + "00" * 32}) == "reject"


def test_without_a_policy_the_account_signs_and_a_paused_policy_is_not_applied() -> None:
    assert evaluate([], "signEvmHash", {}) == "accept"
    assert evaluate([_policy(status="paused")], "signEvmHash", {}) == "accept"
    assert evaluate([_policy()], "signEvmHash", {}) == "reject"


def test_the_project_policy_is_applied_before_the_accounts_and_both_must_accept() -> None:
    accept_all = _policy(_rule("accept", _fields("<=", 10**9)), scope="project")
    account_cap = _policy(_rule("accept", _fields("<=", 10)))

    assert evaluate([accept_all, account_cap], "signEvmTypedData", _typed(5)) == "accept"
    assert evaluate([accept_all, account_cap], "signEvmTypedData", _typed(50)) == "reject"
    refuse_all = _policy(_rule("reject", _fields(">=", 0)), scope="project")
    assert evaluate([refuse_all, account_cap], "signEvmTypedData", _typed(5)) == "reject"


def test_a_field_criterion_holds_only_when_the_messages_types_match_its_own() -> None:
    contract = {"type": "evmTypedDataVerifyingContract", "operator": "in", "addresses": [CONTRACT.lower()]}
    policy = _policy(_rule("accept", contract, _fields("<=", 10)))
    renamed = {**TYPES, "Permit": [{"name": "to", "type": "address"}, {"name": "amount", "type": "uint256"}]}
    other_domain = {"EIP712Domain": [{"name": "name", "type": "string"}], "Permit": TYPES["Permit"]}

    assert evaluate([policy], "signEvmTypedData", _typed(5)) == "accept"
    assert evaluate([policy], "signEvmTypedData", _typed(5, types=renamed)) == "reject"
    assert evaluate([policy], "signEvmTypedData", _typed(5, contract=PAYEE)) == "reject"
    # The domain's own type is not part of the match (CDP's example signs with a shorter one).
    assert evaluate([policy], "signEvmTypedData", {**_typed(5), "types": other_domain}) == "accept"


# -- over HTTP ------------------------------------------------------------------------------------


@pytest.fixture(scope="module", name="standin")
def fixture_standin() -> Iterator[tuple[CdpStandIn, str]]:
    with running_standin() as running:
        yield running


def _bearer(credentials: CdpCredentials, method: str, url: str) -> str:
    parsed = httpx.URL(url)
    token: str = generate_jwt(
        JwtOptions(
            api_key_id=credentials.api_key_id,
            api_key_secret=credentials.api_key_secret,
            request_method=method,
            request_host=f"{parsed.host}:{parsed.port}",
            request_path=parsed.path,
        )
    )
    return token


def _wallet_jwt(credentials: CdpCredentials, method: str, url: str, body: dict[str, Any]) -> str:
    parsed = httpx.URL(url)
    token: str = generate_wallet_jwt(
        WalletJwtOptions(
            wallet_auth_key=credentials.wallet_secret,
            request_method=method,
            request_host=f"{parsed.host}:{parsed.port}",
            request_path=parsed.path,
            request_data=body,
        )
    )
    return token


def test_every_request_needs_a_bearer_jwt_by_its_api_key_for_that_request(
    standin: tuple[CdpStandIn, str],
) -> None:
    running, base = standin
    own = running.credentials
    url = f"{base}/v2/evm/accounts/by-name/nobody"
    other_url = f"{base}/v2/evm/accounts/by-name/somebody"

    def status(headers: dict[str, str]) -> int:
        return httpx.get(url, headers=headers, timeout=10).status_code

    assert status({}) == 401
    assert status({"Authorization": f"Bearer {_bearer(new_credentials(), 'GET', url)}"}) == 401
    assert status({"Authorization": f"Bearer {_bearer(own, 'GET', other_url)}"}) == 401
    assert status({"Authorization": f"Bearer {_bearer(own, 'POST', url)}"}) == 401
    assert status({"Authorization": f"Bearer {_bearer(own, 'GET', url)}"}) == 404  # in, and not found
    ec_key = new_credentials(ec_api_key=True)
    with running_standin(ec_key) as (_, ec_base):
        ec_url = f"{ec_base}/v2/evm/accounts/by-name/nobody"
        answer = httpx.get(
            ec_url, headers={"Authorization": f"Bearer {_bearer(ec_key, 'GET', ec_url)}"}, timeout=10
        )
        assert answer.status_code == 404


def test_where_the_sdk_sends_one_the_wallet_jwt_must_cover_the_body_once(
    standin: tuple[CdpStandIn, str],
) -> None:
    running, base = standin
    own = running.credentials
    url = f"{base}/v2/evm/accounts"
    body = {"name": "wallet-jwt-test"}

    def post(wallet_jwt: str | None, sent: dict[str, Any] = body) -> int:
        headers = {"Authorization": f"Bearer {_bearer(own, 'POST', url)}", "Content-Type": "application/json"}
        if wallet_jwt is not None:
            headers["X-Wallet-Auth"] = wallet_jwt
        return httpx.post(url, content=json.dumps(sent), headers=headers, timeout=10).status_code

    assert post(None) == 401
    assert post(_wallet_jwt(new_credentials(), "POST", url, body)) == 401
    assert post(_wallet_jwt(own, "POST", url, {"name": "another-name"})) == 401
    token = _wallet_jwt(own, "POST", url, body)
    assert post(token) == 201
    assert post(token) == 401  # its jti was used
    assert running.account_named("wallet-jwt-test") is not None


async def test_an_account_signs_with_a_key_of_its_own(standin: tuple[CdpStandIn, str]) -> None:
    running, base = standin
    credentials = running.credentials
    async with CdpClient(
        api_key_id=credentials.api_key_id,
        api_key_secret=credentials.api_key_secret,
        wallet_secret=credentials.wallet_secret,
        base_path=base,
    ) as cdp:
        account = await cdp.evm.create_account(name="signs-itself")
        typed = _typed(7)
        signature = await cdp.evm.sign_typed_data(
            address=account.address,
            domain=typed["domain"],
            types=typed["types"],
            primary_type="Permit",
            message=typed["message"],
        )
        message_signature = await cdp.evm.sign_message(address=account.address, message="hello")
        again = await cdp.evm.get_or_create_account(name="signs-itself")

    assert (
        Account.recover_message(encode_typed_data(full_message=typed), signature=signature) == account.address
    )
    assert (
        Account.recover_message(encode_defunct(text="hello"), signature=message_signature) == account.address
    )
    assert again.address == account.address
    assert running.count("POST", r"/sign/typed-data$") == 1


async def test_an_idempotency_key_replays_the_first_answer_and_refuses_another_body(
    standin: tuple[CdpStandIn, str],
) -> None:
    running, base = standin
    credentials = running.credentials
    policy = CreatePolicyOptions(scope="account", rules=[SignEvmHashRule(action="reject")])
    async with CdpClient(
        api_key_id=credentials.api_key_id,
        api_key_secret=credentials.api_key_secret,
        wallet_secret=credentials.wallet_secret,
        base_path=base,
    ) as cdp:
        key = "1f0c2f3e-8d7a-4c51-9b6e-2a4b6c8d0e1f"
        first = await cdp.policies.create_policy(policy=policy, idempotency_key=key)
        second = await cdp.policies.create_policy(policy=policy, idempotency_key=key)
        with pytest.raises(Exception, match="idempotency"):
            await cdp.policies.create_policy(
                policy=policy.model_copy(update={"description": "Other"}), idempotency_key=key
            )

    assert first.id == second.id
    assert sum(1 for stored in running.policies.values() if stored.id == first.id) == 1
