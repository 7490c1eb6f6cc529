"""The software authenticator's answers are accepted by `webauthn` 3, and bad ones refused.

First the same page endpoints the browser harness drives (tests.support.passkey_demo), over HTTP
with no browser; then webauthn's verification functions directly, for the refusals a passkey
check must make: another challenge, another origin or RP id, no user verification, a replay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from tests.support.passkey_demo import USER_NAME, PasskeyDemo
from tests.support.soft_authenticator import CeremonyRefused, SoftAuthenticator

ORIGIN = "http://localhost:8123"


@pytest.fixture(name="demo_client")
def fixture_demo_client() -> Iterator[tuple[PasskeyDemo, TestClient]]:
    demo = PasskeyDemo(origin=ORIGIN)
    with TestClient(demo.app(), base_url=ORIGIN) as client:
        yield demo, client


def test_the_page_ceremonies_pass_with_the_soft_authenticator(
    demo_client: tuple[PasskeyDemo, TestClient],
) -> None:
    demo, client = demo_client
    authenticator = SoftAuthenticator(ORIGIN)

    options = client.post("/register/options").text
    registered = client.post("/register/verify", json=authenticator.register(options))
    assert registered.status_code == 200, registered.text
    assert registered.json()["userVerified"] is True

    for expected_count in (1, 2):
        options = client.post("/login/options").text
        signed_in = client.post("/login/verify", json=authenticator.authenticate(options))
        assert signed_in.status_code == 200, signed_in.text
        assert signed_in.json() == {
            "ceremony": "authentication",
            "credentialId": registered.json()["credentialId"],
            "signCount": expected_count,
            "userVerified": True,
            "userName": USER_NAME,
        }
    assert [outcome["ceremony"] for outcome in demo.verified] == ["registration", *["authentication"] * 2]
    assert demo.credentials[bytes.fromhex(registered.json()["credentialId"])].sign_count == 2


def test_the_page_refuses_an_assertion_over_an_earlier_challenge(
    demo_client: tuple[PasskeyDemo, TestClient],
) -> None:
    demo, client = demo_client
    authenticator = SoftAuthenticator(ORIGIN)
    client.post("/register/verify", json=authenticator.register(client.post("/register/options").text))

    stale = client.post("/login/options").text
    client.post("/login/options")  # the server now expects this newer challenge
    refused = client.post("/login/verify", json=authenticator.authenticate(stale))

    assert refused.status_code == 400
    assert refused.json() == {"error": "Client data challenge was not expected challenge"}
    assert [outcome["ceremony"] for outcome in demo.verified] == ["registration"]


# Straight to webauthn: each refusal names the check that failed.

RP_ID = "localhost"


def registration(authenticator: SoftAuthenticator) -> tuple[bytes, dict[str, object]]:
    options = generate_registration_options(
        rp_id=RP_ID,
        rp_name="Test",
        user_name="grace@example.test",
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
    )
    return options.challenge, authenticator.register(options_to_json(options))


def registered(authenticator: SoftAuthenticator) -> tuple[bytes, bytes]:
    """(credential id, public key) of a new credential, verified."""
    challenge, response = registration(authenticator)
    verified = verify_registration_response(
        credential=response,
        expected_challenge=challenge,
        expected_rp_id=RP_ID,
        expected_origin=ORIGIN,
        require_user_verification=True,
    )
    assert verified.user_verified is True
    assert verified.sign_count == 0
    return verified.credential_id, verified.credential_public_key


def assertion(authenticator: SoftAuthenticator, credential_id: bytes) -> tuple[bytes, dict[str, object]]:
    options = generate_authentication_options(
        rp_id=RP_ID,
        allow_credentials=[PublicKeyCredentialDescriptor(id=credential_id)],
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    return options.challenge, authenticator.authenticate(options_to_json(options))


def test_an_assertion_verifies_and_counts() -> None:
    authenticator = SoftAuthenticator(ORIGIN)
    credential_id, public_key = registered(authenticator)
    challenge, response = assertion(authenticator, credential_id)

    verified = verify_authentication_response(
        credential=response,
        expected_challenge=challenge,
        expected_rp_id=RP_ID,
        expected_origin=ORIGIN,
        credential_public_key=public_key,
        credential_current_sign_count=0,
        require_user_verification=True,
    )
    assert verified.credential_id == credential_id
    assert verified.new_sign_count == 1
    assert verified.user_verified is True


def test_an_assertion_over_another_challenge_is_refused() -> None:
    authenticator = SoftAuthenticator(ORIGIN)
    credential_id, public_key = registered(authenticator)
    _, response = assertion(authenticator, credential_id)
    expected = generate_authentication_options(rp_id=RP_ID).challenge

    with pytest.raises(InvalidAuthenticationResponse, match="challenge was not expected challenge"):
        verify_authentication_response(
            credential=response,
            expected_challenge=expected,
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            credential_public_key=public_key,
            credential_current_sign_count=0,
            require_user_verification=True,
        )


def test_an_assertion_from_another_origin_is_refused() -> None:
    authenticator = SoftAuthenticator(ORIGIN)
    credential_id, public_key = registered(authenticator)
    elsewhere = SoftAuthenticator("http://localhost:9999", credentials=authenticator.credentials)
    challenge, response = assertion(elsewhere, credential_id)

    with pytest.raises(InvalidAuthenticationResponse, match="Unexpected client data origin"):
        verify_authentication_response(
            credential=response,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            credential_public_key=public_key,
            credential_current_sign_count=0,
            require_user_verification=True,
        )


def test_a_registration_without_user_verification_is_refused() -> None:
    challenge, response = registration(SoftAuthenticator(ORIGIN, user_verified=False))

    with pytest.raises(InvalidRegistrationResponse, match="User verification is required"):
        verify_registration_response(
            credential=response,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            require_user_verification=True,
        )


def test_an_assertion_without_user_verification_is_refused() -> None:
    authenticator = SoftAuthenticator(ORIGIN)
    credential_id, public_key = registered(authenticator)
    authenticator.user_verified = False
    challenge, response = assertion(authenticator, credential_id)

    with pytest.raises(InvalidAuthenticationResponse, match="User verification is required"):
        verify_authentication_response(
            credential=response,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            credential_public_key=public_key,
            credential_current_sign_count=0,
            require_user_verification=True,
        )


def test_a_replayed_assertion_fails_the_sign_count_check() -> None:
    authenticator = SoftAuthenticator(ORIGIN)
    credential_id, public_key = registered(authenticator)
    challenge, response = assertion(authenticator, credential_id)

    def verify(current_sign_count: int) -> int:
        return verify_authentication_response(
            credential=response,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            credential_public_key=public_key,
            credential_current_sign_count=current_sign_count,
            require_user_verification=True,
        ).new_sign_count

    stored_count = verify(0)
    with pytest.raises(InvalidAuthenticationResponse, match="sign count"):
        verify(stored_count)


def test_a_tampered_signature_is_refused() -> None:
    authenticator = SoftAuthenticator(ORIGIN)
    credential_id, public_key = registered(authenticator)
    challenge, response = assertion(authenticator, credential_id)
    tampered = json.loads(json.dumps(response))
    data = tampered["response"]["authenticatorData"]
    # Flip one character of the counter's base64url text: the signed bytes no longer match.
    tampered["response"]["authenticatorData"] = data[:-2] + ("A" if data[-2] != "A" else "B") + data[-1]

    with pytest.raises(InvalidAuthenticationResponse, match="Could not verify authentication signature"):
        verify_authentication_response(
            credential=tampered,
            expected_challenge=challenge,
            expected_rp_id=RP_ID,
            expected_origin=ORIGIN,
            credential_public_key=public_key,
            credential_current_sign_count=0,
            require_user_verification=True,
        )


def test_the_authenticator_refuses_what_a_browser_would() -> None:
    with pytest.raises(CeremonyRefused, match="SecurityError"):
        registration(SoftAuthenticator("http://127.0.0.1:8123"))
    authenticator = SoftAuthenticator(ORIGIN)
    with pytest.raises(CeremonyRefused, match="NotAllowedError"):
        assertion(authenticator, b"never-registered")
    credential_id, _ = registered(authenticator)
    options = generate_registration_options(
        rp_id=RP_ID,
        rp_name="Test",
        user_name="grace@example.test",
        exclude_credentials=[PublicKeyCredentialDescriptor(id=credential_id)],
    )
    with pytest.raises(CeremonyRefused, match="InvalidStateError"):
        authenticator.register(options_to_json(options))
