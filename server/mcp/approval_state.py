"""The sealed `requestState` of a held fetch_paid at protocol 2026-07-28.

At 2026-07-28 there are no sessions and no server-to-client requests: a held payment answers with
an `input_required` result carrying a URL elicitation and this state, and the client retries the
same call with the state. The state is the server's memory of the purchase, held by the client, so
it is authenticated and encrypted (AES-256-GCM under a key derived from the master key with HKDF,
so every server process opens what any other sealed) and bound to the token's agent and
organisation, the tool, a digest of the call's arguments, and an expiry.

Opening a state that is malformed, forged, expired, another agent's or another tool's is
`invalid_input` / `invalid_approval_state`; a genuine state presented with other arguments is
`invalid_input` / `approval_state_mismatch`. Neither ever pays.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from auth.principal import Principal
from server.kit.errors import InputReason, InvalidInput

KEY_PURPOSE = "paywarden mcp approval request state v1"
PREFIX = "pwas1."
_AAD = PREFIX.encode()
_NONCE = 12
MAX_STATE_CHARS = 4096


@dataclass(frozen=True)
class ApprovalState:
    """What a retry needs to continue the same purchase."""

    approval_id: str
    idempotency_key: str
    elicitation_id: str


def arguments_digest(arguments: dict[str, Any]) -> str:
    """SHA-256 of the arguments as canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _principal_ref(principal: Principal) -> str:
    return f"{principal.org_id}/{principal.agent_id}"


class ApprovalStateSealer:
    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def seal(
        self,
        state: ApprovalState,
        *,
        principal: Principal,
        tool: str,
        arguments: dict[str, Any],
        expires_at: datetime,
    ) -> str:
        claims = {
            "p": _principal_ref(principal),
            "t": tool,
            "a": arguments_digest(arguments),
            "exp": int(expires_at.timestamp()),
            "ap": state.approval_id,
            "k": state.idempotency_key,
            "e": state.elicitation_id,
        }
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, json.dumps(claims, separators=(",", ":")).encode(), _AAD)
        return PREFIX + base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")

    def open(
        self, token: object, *, principal: Principal, tool: str, arguments: dict[str, Any], now: datetime
    ) -> ApprovalState:
        claims = self._claims(token)
        try:
            if claims["p"] != _principal_ref(principal) or claims["t"] != tool:
                raise InvalidInput(InputReason.INVALID_APPROVAL_STATE)
            if not now.timestamp() < float(claims["exp"]):
                raise InvalidInput(InputReason.INVALID_APPROVAL_STATE)
            if claims["a"] != arguments_digest(arguments):
                raise InvalidInput(InputReason.APPROVAL_STATE_MISMATCH)
            return ApprovalState(str(claims["ap"]), str(claims["k"]), str(claims["e"]))
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidInput):
                raise
            raise InvalidInput(InputReason.INVALID_APPROVAL_STATE) from None

    def _claims(self, token: object) -> dict[str, Any]:
        if not isinstance(token, str) or not token.startswith(PREFIX) or len(token) > MAX_STATE_CHARS:
            raise InvalidInput(InputReason.INVALID_APPROVAL_STATE)
        body = token[len(PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plaintext = self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], _AAD)
            claims = json.loads(plaintext)
        except (ValueError, InvalidTag):
            raise InvalidInput(InputReason.INVALID_APPROVAL_STATE) from None
        if not isinstance(claims, dict):
            raise InvalidInput(InputReason.INVALID_APPROVAL_STATE)
        return claims


def state_expiry(approval_expires_at: datetime, retry_window: timedelta) -> datetime:
    """A state lives as long as its approval could still pay: its TTL, then the retry window."""
    return approval_expires_at + retry_window
