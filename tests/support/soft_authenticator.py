"""A software passkey authenticator for tests that run WebAuthn ceremonies without a browser.

`SoftAuthenticator` plays the browser and the authenticator together: it reads the JSON options a
server sends (webauthn's `options_to_json`, exactly what a page hands to
`PublicKeyCredential.parseCreationOptionsFromJSON`) and answers with what `credential.toJSON()`
would post back, so a test drives a server's real endpoints and the `webauthn` package verifies the
result as it would a browser's. Keys are real P-256 keys; the data structures are fido2's.

Like Chrome's virtual authenticator it makes discoverable (resident) credentials, sets the user
present and user verified flags, and counts signatures. Unlike a browser it checks only what a
test needs: the RP id against the origin, the algorithm, excluded and allowed credentials.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from fido2.cose import ES256
from fido2.rpid import verify_rp_id
from fido2.utils import sha256, websafe_decode, websafe_encode
from fido2.webauthn import (
    AttestationObject,
    AttestedCredentialData,
    AuthenticatorData,
    CollectedClientData,
)

# AAGUID of no particular model: "none" attestation says nothing about the authenticator anyway.
AAGUID = bytes(16)
Options = str | dict[str, Any]


class CeremonyRefused(Exception):
    """What a browser would report as NotAllowedError or InvalidStateError."""


@dataclass
class SoftCredential:
    credential_id: bytes
    rp_id: str
    user_handle: bytes
    user_name: str
    private_key: ec.EllipticCurvePrivateKey = field(repr=False)
    sign_count: int = 0

    @property
    def id(self) -> str:
        """The credential id as it travels in JSON (base64url, no padding)."""
        return websafe_encode(self.credential_id)


@dataclass
class SoftAuthenticator:
    """One authenticator used from one origin, e.g. `SoftAuthenticator("http://localhost:8123")`.

    `user_verified=False` imitates an authenticator that only tests presence, and
    `sign_count_step=0` one that never counts (as many synced passkeys do).
    """

    origin: str
    user_verified: bool = True
    sign_count_step: int = 1
    credentials: list[SoftCredential] = field(default_factory=list)

    def register(self, options: Options) -> dict[str, Any]:
        """Answer `navigator.credentials.create()` for creation options given as JSON."""
        public_key = _public_key_options(options)
        rp_id = public_key.get("rp", {}).get("id") or _host(self.origin)
        self._check_rp_id(rp_id)
        algorithms = [param.get("alg") for param in public_key.get("pubKeyCredParams", [])]
        if algorithms and ES256.ALGORITHM not in algorithms:
            raise CeremonyRefused(f"no supported algorithm among {algorithms}: this authenticator has ES256")
        excluded = {item["id"] for item in public_key.get("excludeCredentials", [])}
        if any(c.rp_id == rp_id and c.id in excluded for c in self.credentials):
            raise CeremonyRefused("InvalidStateError: a credential of this authenticator is excluded")

        user = public_key["user"]
        credential = SoftCredential(
            credential_id=secrets.token_bytes(32),
            rp_id=rp_id,
            user_handle=websafe_decode(user["id"]),
            user_name=user.get("name", ""),
            private_key=ec.generate_private_key(ec.SECP256R1()),
        )
        attested = AttestedCredentialData.create(
            AAGUID, credential.credential_id, _cose_key(credential.private_key)
        )
        flags = self._flags() | AuthenticatorData.FLAG.AT
        auth_data = AuthenticatorData.create(sha256(rp_id.encode()), flags, credential.sign_count, attested)
        client_data = self._client_data(CollectedClientData.TYPE.CREATE, public_key["challenge"])
        attestation = AttestationObject.create("none", auth_data, {})
        self.credentials.append(credential)
        return {
            "id": credential.id,
            "rawId": credential.id,
            "type": "public-key",
            "authenticatorAttachment": "platform",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": websafe_encode(bytes(client_data)),
                "attestationObject": websafe_encode(bytes(attestation)),
                "transports": ["internal"],
            },
        }

    def authenticate(self, options: Options, *, credential_id: str | None = None) -> dict[str, Any]:
        """Answer `navigator.credentials.get()` for request options given as JSON.

        With an empty `allowCredentials` (usernameless sign-in) the newest credential for the RP is
        used, unless `credential_id` picks one.
        """
        public_key = _public_key_options(options)
        rp_id = public_key.get("rpId") or _host(self.origin)
        self._check_rp_id(rp_id)
        allowed = {item["id"] for item in public_key.get("allowCredentials", [])}
        candidates = [
            c
            for c in self.credentials
            if c.rp_id == rp_id
            and (not allowed or c.id in allowed)
            and (credential_id is None or c.id == credential_id)
        ]
        if not candidates:
            raise CeremonyRefused(f"NotAllowedError: no credential for {rp_id} among the allowed ones")
        credential = candidates[-1]
        credential.sign_count += self.sign_count_step
        auth_data = AuthenticatorData.create(sha256(rp_id.encode()), self._flags(), credential.sign_count)
        client_data = self._client_data(CollectedClientData.TYPE.GET, public_key["challenge"])
        signature = credential.private_key.sign(
            bytes(auth_data) + client_data.hash, ec.ECDSA(hashes.SHA256())
        )
        return {
            "id": credential.id,
            "rawId": credential.id,
            "type": "public-key",
            "authenticatorAttachment": "platform",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": websafe_encode(bytes(client_data)),
                "authenticatorData": websafe_encode(bytes(auth_data)),
                "signature": websafe_encode(signature),
                "userHandle": websafe_encode(credential.user_handle),
            },
        }

    def _flags(self) -> AuthenticatorData.FLAG:
        flags = AuthenticatorData.FLAG.UP
        if self.user_verified:
            flags |= AuthenticatorData.FLAG.UV
        return flags

    def _client_data(self, kind: str, challenge: str) -> CollectedClientData:
        return CollectedClientData.create(type=kind, challenge=websafe_decode(challenge), origin=self.origin)

    def _check_rp_id(self, rp_id: str) -> None:
        # fido2's check, as a browser makes it: the RP id must be the origin's host or a suffix of it,
        # over https except for localhost.
        if not verify_rp_id(rp_id, self.origin):
            raise CeremonyRefused(f"SecurityError: RP id {rp_id!r} is not valid for origin {self.origin}")


def _public_key_options(options: Options) -> dict[str, Any]:
    parsed = json.loads(options) if isinstance(options, str) else options
    # Accept both the bare options and the {"publicKey": ...} wrapper a page passes to the browser.
    inner = parsed.get("publicKey", parsed)
    assert isinstance(inner, dict)
    return inner


def _host(origin: str) -> str:
    return urlsplit(origin).hostname or ""


def _cose_key(private_key: ec.EllipticCurvePrivateKey) -> ES256:
    """The credential's public key in COSE form (fido2 leaves this constructor untyped)."""
    key: ES256 = ES256.from_cryptography_key(private_key.public_key())  # type: ignore[no-untyped-call]
    return key
