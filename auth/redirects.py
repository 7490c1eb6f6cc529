"""Redirect URIs: which ones a client may register, and whether a requested one matches.

Matching is exact, with one exception from RFC 8252 section 7.3: a loopback redirect (`http://`
to 127.0.0.1, [::1] or localhost) matches on any port, because native clients register a
portless loopback URI and then listen on whatever port is free. Host, path and query must still
be exactly the registered ones. Fragments and wildcards are never accepted.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

MAX_REDIRECT_URI_LENGTH = 2048
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
# Native clients people use whose redirect scheme predates the reverse-domain rule. Each one is a
# deliberate exception (docs/security.md); every other dotless scheme is refused.
KNOWN_NATIVE_CLIENT_SCHEMES = frozenset({"cursor"})


def is_reverse_domain_scheme(scheme: str) -> bool:
    """RFC 8252 section 7.1: a private-use scheme is a reverse domain name, `com.example.app`,
    at least two labels and none of them empty. This also rules out every dotless scheme that
    runs code or reads files (`javascript`, `data`, `file`, `view-source`, `jar`, ...)."""
    labels = scheme.split(".")
    return len(labels) >= 2 and all(labels)


def _parts(uri: str) -> SplitResult | None:
    try:
        parts = urlsplit(uri)
        _ = parts.port
    except ValueError:
        return None
    return parts


def is_loopback_http(uri: str) -> bool:
    parts = _parts(uri)
    return parts is not None and parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS


def acceptable_redirect_uri(uri: object) -> bool:
    """Whether a client may register `uri`: https; http on a loopback host; or a native app's
    private-use scheme in reverse-domain form (`com.example.app:/callback`), or one of the known
    native clients' schemes. Never a fragment, a user name, or a wildcard: an allow rule, so a
    scheme nobody thought of is refused."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_REDIRECT_URI_LENGTH:
        return False
    if "#" in uri or "*" in uri or any(ch.isspace() for ch in uri):
        return False
    parts = _parts(uri)
    if parts is None or not parts.scheme or parts.username is not None or parts.password is not None:
        return False
    if parts.scheme == "https":
        return bool(parts.hostname)
    if parts.scheme == "http":
        return parts.hostname in LOOPBACK_HOSTS
    if not (is_reverse_domain_scheme(parts.scheme) or parts.scheme in KNOWN_NATIVE_CLIENT_SCHEMES):
        return False
    # A private-use scheme must still name somewhere: `app:/path` or `app://host/path`.
    return bool(parts.netloc or parts.path)


def redirect_matches(registered: str, requested: str) -> bool:
    """Whether `requested` may be used by a client that registered `registered`."""
    if requested == registered:
        return True
    if not (is_loopback_http(registered) and is_loopback_http(requested)):
        return False
    if "#" in requested:
        return False
    want, got = _parts(registered), _parts(requested)
    assert want is not None
    assert got is not None
    return (
        want.hostname == got.hostname
        and want.path == got.path
        and want.query == got.query
        and got.username is None
        and got.password is None
    )


def host_of(uri: str) -> str:
    """What the consent page shows of a redirect: its host (with port), or its scheme for an app."""
    parts = _parts(uri)
    if parts is None:
        return uri
    if parts.scheme in ("http", "https") and parts.netloc:
        return parts.netloc
    return f"{parts.scheme}: (an application on this device)"
