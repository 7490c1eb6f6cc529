"""Where a page may send a person after signing in: a path on this site that the server rebuilt
itself, never the text the request carried.

Browsers forgive a lot in a URL (they drop tabs and newlines, read a backslash as a slash, decode
`%2F` in places), so a path that looks local to a check can leave the site once a browser has
cleaned it: `/\\t/evil.example` becomes `//evil.example`. So anything a browser might rewrite is
refused outright, the rest is parsed against the pages' origin, and only the path and query of a
same-origin result are handed back.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

HOME = "/admin"
MAX_LENGTH = 4096
# Anywhere: control characters, spaces and backslashes, which a browser drops or rewrites.
_REFUSED = re.compile(r"[\x00-\x20\x7f\\]")
# In the path only: their percent-encoded forms and encoded slashes. The query may carry them
# encoded (an OAuth `redirect_uri=https%3A%2F%2F…`): nothing after `?` can change the host.
_REFUSED_IN_PATH = re.compile(r"%(?:[01][0-9a-f]|20|7f|2f|5c)", re.IGNORECASE)


def after_sign_in(value: str | None, *, origin: str) -> str:
    """The path (and query) to go to on `origin`, or HOME when `value` is not plainly one."""
    if not value or len(value) > MAX_LENGTH or not value.startswith("/") or value.startswith("//"):
        return HOME
    path = value.split("?", 1)[0].split("#", 1)[0]
    if _REFUSED.search(value) or _REFUSED_IN_PATH.search(path):
        return HOME
    if any(character.isspace() for character in value):
        return HOME
    site = urlsplit(origin)
    try:
        target = urlsplit(urljoin(f"{site.scheme}://{site.netloc}/", value))
    except ValueError:
        return HOME
    if (target.scheme, target.netloc) != (site.scheme, site.netloc) or not target.path.startswith("/"):
        return HOME
    rebuilt = target.path + (f"?{target.query}" if target.query else "")
    return rebuilt if not rebuilt.startswith("//") else HOME
