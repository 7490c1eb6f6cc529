"""Host names and host patterns.

A pattern is an exact host (`api.example.com`) or a wildcard (`*.example.com`) that matches any
subdomain but never the apex. Hosts and patterns are written in the one spelling the seller client
resolves and dials (server/sellers/urls.py): lower-case, no trailing dot, internationalised names
as UTS 46 / IDNA 2008 A-labels, IPv4 addresses as dotted quads. So `faß.de` is `xn--fa-hia.de`
everywhere, never `fass.de`, and look-alike Unicode cannot slip past a pattern.
"""

from __future__ import annotations

import re

from server.sellers.urls import InvalidHostName, canonical_host

_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")


class HostPatternError(ValueError):
    pass


def normalize_host(host: str) -> str:
    """A host in the spelling that is judged, recorded, resolved and dialled."""
    try:
        return canonical_host(host)
    except InvalidHostName as exc:
        raise HostPatternError(f"invalid host {host!r}") from exc


def normalize_pattern(pattern: str) -> str:
    """Validate and normalise a host pattern given by a human (CLI, API, dashboard)."""
    raw = pattern.strip()
    wildcard = raw.startswith("*.")
    host = normalize_host(raw[2:] if wildcard else raw)
    labels = host.split(".")
    if any(not _LABEL.match(label) for label in labels):
        raise HostPatternError(f"invalid host pattern {pattern!r}")
    if wildcard and len(labels) < 2:
        raise HostPatternError(f"wildcard {pattern!r} must name a domain with a dot, like *.example.com")
    return f"*.{host}" if wildcard else host


def host_matches(pattern: str, host: str) -> bool:
    if pattern.startswith("*."):
        suffix = pattern[1:]  # ".example.com"
        return host.endswith(suffix) and len(host) > len(suffix)
    return host == pattern


def host_matches_any(patterns: tuple[str, ...] | list[str], host: str) -> bool:
    return any(host_matches(pattern, host) for pattern in patterns)
