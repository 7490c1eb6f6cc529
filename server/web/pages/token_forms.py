"""A form that issues a token, issued once: each rendering carries a one-time nonce, and a keyed
hash of it names the token before it exists. The same form posted again (a reload of the answer
that showed the secret, a double click) names a token that exists already, so nothing new is
issued (auth/tokens.py raises TokenAlreadyIssued, even when two requests race)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

from server.kit.crypto import MasterKey

NONCE = re.compile(r"^[A-Za-z0-9_-]{22}$")  # secrets.token_urlsafe(16)
STALE_FORM = "No token was issued: this form is out of date. Reload the page and try again."
SHOWN_ALREADY = (
    "This token was already issued and shown once, so it is not shown again and no other was issued. "
    "If it was lost, revoke it below and issue a new one."
)


def new_nonce() -> str:
    return secrets.token_urlsafe(16)


def is_nonce(value: str | None) -> bool:
    return value is not None and NONCE.match(value) is not None


def token_id_for(master: MasterKey, *, member_id: str, subject: str, nonce: str) -> str:
    """The id the token issued through one rendering of a form gets (`subject`: what the token is
    for, an agent's id or the admin API). Keyed, so a nonce cannot be chosen to name someone else's
    token."""
    key = master.derive("paywarden token form")
    mac = hmac.new(key, f"{member_id}\0{subject}\0{nonce}".encode(), hashlib.sha256)
    return f"tok_{mac.hexdigest()[:20]}"
