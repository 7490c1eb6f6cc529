"""Custom redirect schemes follow RFC 8252 section 7.1: a native application's private-use scheme
is a reverse domain name (it contains a dot, `com.example.app:/cb`). Anything else that is not
https, or http on a loopback host, is refused, at registration and in client ID metadata
documents alike, except the few dotless schemes of known native clients (Cursor's `cursor:`)."""

from __future__ import annotations

import httpx
import pytest

from auth.redirects import KNOWN_NATIVE_CLIENT_SCHEMES, acceptable_redirect_uri
from tests.support.paywarden import RunningServer

# (redirect URI, accepted)
SCHEMES: list[tuple[str, bool]] = [
    ("com.example.app:/oauth2redirect", True),
    ("com.example.app://callback", True),
    ("io.github.someone.tool:/cb", True),
    ("cursor://anysphere.cursor-mcp/oauth/callback", True),  # a known native client
    ("view-source:https://app.example.com/cb", False),
    ("jar:https://app.example.com/x.jar!/cb", False),
    ("x-javascript:alert(1)", False),
    ("javascript:alert(1)", False),
    ("data:text/html,hi", False),
    ("file:///etc/passwd", False),
    ("myapp:/callback", False),  # dotless: not a reverse domain name
    ("myapp://callback", False),
    ("vscode://callback", False),
    ("ms-settings:/cb", False),
    ("com..example:/cb", False),  # an empty label is no domain name
    (".example:/cb", False),
    ("com.example.:/cb", False),
    ("com.example.app:", False),  # names nowhere
]


def test_only_cursor_is_a_known_dotless_scheme() -> None:
    assert frozenset({"cursor"}) == KNOWN_NATIVE_CLIENT_SCHEMES


@pytest.mark.parametrize(("uri", "ok"), SCHEMES)
def test_which_private_use_schemes_a_client_may_register(uri: str, ok: bool) -> None:
    assert acceptable_redirect_uri(uri) is ok


def test_registration_applies_the_same_rule(server: RunningServer) -> None:
    for uri, ok in SCHEMES:
        answer = httpx.post(
            f"{server.public_url}/oauth/register",
            json={"redirect_uris": [uri], "token_endpoint_auth_method": "none"},
            timeout=10,
        )
        if ok:
            assert answer.status_code == 201, (uri, answer.text)
            assert answer.json()["redirect_uris"] == [uri]
        else:
            assert answer.status_code == 400, (uri, answer.text)
            assert answer.json()["error"] == "invalid_redirect_uri", uri
