"""Which redirect URIs a client may register, and when a requested one matches (RFC 8252's
loopback rule included), as a table."""

from __future__ import annotations

import pytest

from auth.redirects import acceptable_redirect_uri, host_of, redirect_matches


@pytest.mark.parametrize(
    ("uri", "ok"),
    [
        ("https://app.example.com/callback", True),
        ("https://app.example.com:8443/cb?tenant=1", True),
        ("http://127.0.0.1/callback", True),
        ("http://[::1]:8080/callback", True),
        ("http://localhost/callback", True),
        ("cursor://anysphere.cursor-mcp/oauth/callback", True),
        ("com.example.app:/oauth2redirect", True),
        ("http://app.example.com/callback", False),  # http only on loopback
        ("http://127.0.0.2/callback", False),
        ("https://app.example.com/cb#frag", False),
        ("https://*.example.com/cb", False),
        ("https://user:pw@app.example.com/cb", False),
        ("javascript:alert(1)", False),
        ("data:text/html,hi", False),
        ("file:///etc/passwd", False),
        ("https:///nohost", False),
        ("/relative/callback", False),
        ("", False),
        ("https://app.example.com/" + "x" * 2100, False),
        (42, False),
    ],
)
def test_what_a_client_may_register(uri: object, ok: bool) -> None:
    assert acceptable_redirect_uri(uri) is ok


@pytest.mark.parametrize(
    ("registered", "requested", "ok"),
    [
        ("https://app.example.com/cb", "https://app.example.com/cb", True),
        ("https://app.example.com/cb", "https://app.example.com/cb/", False),
        ("https://app.example.com:8443/cb", "https://app.example.com:9443/cb", False),
        ("http://127.0.0.1/callback", "http://127.0.0.1:51234/callback", True),
        ("http://127.0.0.1:3000/callback", "http://127.0.0.1:51234/callback", True),
        ("http://localhost/callback", "http://localhost:8080/callback", True),
        ("http://[::1]/callback", "http://[::1]:8080/callback", True),
        ("http://127.0.0.1/callback", "http://localhost:51234/callback", False),  # another host
        ("http://127.0.0.1/callback", "http://127.0.0.1:51234/other", False),
        ("http://127.0.0.1/callback?a=1", "http://127.0.0.1:5/callback?a=2", False),
        ("http://127.0.0.1/callback", "http://127.0.0.1:5/callback#x", False),
        ("http://127.0.0.1/callback", "https://127.0.0.1:5/callback", False),
    ],
)
def test_when_a_requested_redirect_matches(registered: str, requested: str, ok: bool) -> None:
    assert redirect_matches(registered, requested) is ok


def test_what_the_consent_page_shows_of_a_redirect() -> None:
    assert host_of("https://app.example.com:8443/cb") == "app.example.com:8443"
    assert host_of("cursor://anysphere.cursor-mcp/cb") == "cursor: (an application on this device)"
