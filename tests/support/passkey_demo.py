"""A tiny relying party for proving the passkey test harness: one page, register and sign in.

The server side is the `webauthn` package exactly as Paywarden's pages use it: options from
`generate_*_options` sent with `options_to_json`, answers checked by `verify_registration_response`
and `verify_authentication_response`, user verification required. The page parses the options
with `PublicKeyCredential.parse*OptionsFromJSON` and posts `credential.toJSON()` back. State is in
memory: this app exists only for tests of the harness itself.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import base64url_to_bytes
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

RP_ID = "localhost"
USER_NAME = "ada@example.test"

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Passkey check</title>
<style>
  body { font: 1.1rem/1.5 system-ui, sans-serif; max-width: 32rem; margin: 2rem auto; padding: 0 1rem; }
  button { font: inherit; padding: .6rem 1.2rem; margin: .3rem .3rem .3rem 0; }
  #status { padding: .8rem; border: 2px solid #555; border-radius: .4rem; min-height: 3rem; }
</style>
</head>
<body>
<main>
<h1>Passkey check</h1>
<p>Signed in as nobody yet. Create a passkey, then sign in with it.</p>
<button id="register" type="button">Create a passkey</button>
<button id="sign-in" type="button">Sign in with a passkey</button>
<p id="status" role="status" aria-live="polite">Nothing done yet.</p>
</main>
<script>
async function post(path, body) {
  const response = await fetch(path, {
    method: "POST",
    headers: {"Content-Type": "application/json"},
    body: body === undefined ? "{}" : JSON.stringify(body),
  });
  return {ok: response.ok, body: await response.json()};
}
function show(text) { document.getElementById("status").textContent = text; }
async function register() {
  const options = await post("/register/options");
  const credential = await navigator.credentials.create({
    publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options.body),
  });
  const verified = await post("/register/verify", credential.toJSON());
  show(verified.ok ? "Passkey created." : "Passkey refused: " + verified.body.error);
  return verified.body;
}
async function signIn() {
  const options = await post("/login/options");
  const credential = await navigator.credentials.get({
    publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(options.body),
  });
  const verified = await post("/login/verify", credential.toJSON());
  show(verified.ok
    ? "Signed in as " + verified.body.userName + "."
    : "Sign-in refused: " + verified.body.error);
  return verified.body;
}
document.getElementById("register").addEventListener("click", register);
document.getElementById("sign-in").addEventListener("click", signIn);
window.passkeyCheck = {register, signIn};
</script>
</body>
</html>
"""


@dataclass
class StoredCredential:
    credential_id: bytes
    public_key: bytes
    sign_count: int
    user_name: str


@dataclass
class PasskeyDemo:
    """The relying party. Set `origin` to the page's origin (`http://localhost:PORT`) before use."""

    origin: str = ""
    user_id: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    credentials: dict[bytes, StoredCredential] = field(default_factory=dict)
    registration_challenge: bytes | None = None
    login_challenge: bytes | None = None
    # Every verification's outcome, for tests to check what the server concluded.
    verified: list[dict[str, Any]] = field(default_factory=list)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/", self.page, methods=["GET"]),
                Route("/register/options", self.register_options, methods=["POST"]),
                Route("/register/verify", self.register_verify, methods=["POST"]),
                Route("/login/options", self.login_options, methods=["POST"]),
                Route("/login/verify", self.login_verify, methods=["POST"]),
            ]
        )

    async def page(self, _request: Request) -> Response:
        return HTMLResponse(PAGE)

    async def register_options(self, _request: Request) -> Response:
        options = generate_registration_options(
            rp_id=RP_ID,
            rp_name="Passkey check",
            user_name=USER_NAME,
            user_id=self.user_id,
            exclude_credentials=[],
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
        )
        self.registration_challenge = options.challenge
        return _json_text(options_to_json(options))

    async def register_verify(self, request: Request) -> Response:
        challenge, self.registration_challenge = self.registration_challenge, None
        if challenge is None:
            return JSONResponse({"error": "no registration was started"}, status_code=400)
        try:
            result = verify_registration_response(
                credential=await request.json(),
                expected_challenge=challenge,
                expected_rp_id=RP_ID,
                expected_origin=self.origin,
                require_user_verification=True,
            )
        except InvalidRegistrationResponse as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        self.credentials[result.credential_id] = StoredCredential(
            credential_id=result.credential_id,
            public_key=result.credential_public_key,
            sign_count=result.sign_count,
            user_name=USER_NAME,
        )
        outcome = {
            "ceremony": "registration",
            "credentialId": result.credential_id.hex(),
            "signCount": result.sign_count,
            "userVerified": result.user_verified,
            "deviceType": result.credential_device_type.value,
        }
        self.verified.append(outcome)
        return JSONResponse(outcome)

    async def login_options(self, _request: Request) -> Response:
        # Usernameless: no allowCredentials, the authenticator offers its resident credential.
        options = generate_authentication_options(
            rp_id=RP_ID, user_verification=UserVerificationRequirement.REQUIRED
        )
        self.login_challenge = options.challenge
        return _json_text(options_to_json(options))

    async def login_verify(self, request: Request) -> Response:
        challenge, self.login_challenge = self.login_challenge, None
        if challenge is None:
            return JSONResponse({"error": "no sign-in was started"}, status_code=400)
        body = await request.json()
        stored = self.credentials.get(_raw_id(body))
        if stored is None:
            return JSONResponse({"error": "this passkey is not registered here"}, status_code=400)
        try:
            result = verify_authentication_response(
                credential=body,
                expected_challenge=challenge,
                expected_rp_id=RP_ID,
                expected_origin=self.origin,
                credential_public_key=stored.public_key,
                credential_current_sign_count=stored.sign_count,
                require_user_verification=True,
            )
        except InvalidAuthenticationResponse as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        stored.sign_count = result.new_sign_count
        outcome = {
            "ceremony": "authentication",
            "credentialId": result.credential_id.hex(),
            "signCount": result.new_sign_count,
            "userVerified": result.user_verified,
            "userName": stored.user_name,
        }
        self.verified.append(outcome)
        return JSONResponse(outcome)


def _json_text(text: str) -> Response:
    return Response(text, media_type="application/json")


def _raw_id(credential: dict[str, Any]) -> bytes:
    return base64url_to_bytes(str(credential.get("rawId") or credential.get("id") or ""))
