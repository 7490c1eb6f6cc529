"""The one canonical form of a request to a seller: what the policy judges is what goes on the wire.

`parse_target` turns a URL into a `Target`: scheme, host, port, path and query, normalised once
(RFC 3986 section 6) and never again. Every rule, hold, approval, record and the ledger's counting
use the target's host and path, and the seller client writes exactly `target.request_target` and
`target.authority` on the socket. Spellings that servers read differently are refused rather than
guessed at, with a `urlProblem` naming what was found:

- host: lower-case, no trailing dot, internationalised names in their A-label form by UTS 46
  (non-transitional, so IDNA 2008: `faß.de` is `xn--fa-hia.de`, never `fass.de`); an IPv4 address
  in any spelling (`0x7f.1`, `2130706433`) is its dotted quad; an IPv6 address is compressed, in
  brackets, zone dropped. A host that is neither a valid name nor an address is refused (`host`).
- port: the scheme's default unless another is given; the default is left out of the URL.
- path: percent-encoding normalised (escapes of unreserved characters and of the punctuation a path
  may carry as it is are decoded, every other escape upper-case), characters a path may not carry
  raw are escaped, then dot segments are removed (RFC 3986 section 5.2.4). Refused: `%2F` and `%5C`
  (`encoded_slash`), `%2E` (`encoded_dot`), `%25` (`double_encoding`), `;` or `%3B`
  (`path_parameter`), `//` (`empty_segment`), non-ASCII in any form (`non_ascii`), and control
  characters in any form (`control_character`).
- query: the same escapes normalised and nothing reordered; escapes of reserved characters stay
  as they are (`%26` is not `&` in a query), non-ASCII is sent as UTF-8 escapes, an empty query is
  dropped.
- anywhere: `%00` (`nul`), a backslash (`backslash`), white space and control characters
  (`control_character`), a `%` not followed by two hex digits (`malformed_percent`).

Pure: no I/O, no domain imports. The vocabulary of problems is `UrlProblem`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import SplitResult, urljoin, urlsplit

import idna

from server.kit.errors import InputReason, InvalidInput
from server.sellers.addresses import InvalidHost, canonical, parse_ip_literal

MAX_URL_LENGTH = 2048
MAX_HOST_LENGTH = 253
DEFAULT_PORTS = {"https": 443, "http": 80}

_HEX = "0123456789ABCDEFabcdef"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
# Carried as they are in a path segment (RFC 3986 pchar), `;` excepted: it is refused.
_PATH_RAW = _UNRESERVED | frozenset("!$&'()*+,=:@")
_QUERY_RAW = _UNRESERVED | frozenset("!$&'()*+,;=:@/?")
_LABEL = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")


class UrlProblem(StrEnum):
    """Why a URL was refused as `invalid_url`: the `urlProblem` field of the error."""

    SYNTAX = "syntax"  # not an absolute URL Paywarden can read (or longer than 2048 characters)
    HOST = "host"  # neither a valid host name nor an IP address
    PORT = "port"
    CONTROL_CHARACTER = "control_character"  # white space or a control character, raw or escaped
    NUL = "nul"
    BACKSLASH = "backslash"
    MALFORMED_PERCENT = "malformed_percent"
    ENCODED_SLASH = "encoded_slash"  # %2F or %5C in the path
    ENCODED_DOT = "encoded_dot"  # %2E in the path
    DOUBLE_ENCODING = "double_encoding"  # %25 in the path
    PATH_PARAMETER = "path_parameter"  # ; or %3B in the path
    EMPTY_SEGMENT = "empty_segment"  # // in the path
    NON_ASCII = "non_ascii"  # in the path, raw or escaped
    UNSENDABLE = "unsendable"  # the HTTP library would not send it exactly as judged


def refused(problem: UrlProblem) -> InvalidInput:
    return InvalidInput(InputReason.INVALID_URL, urlProblem=str(problem))


class InvalidHostName(ValueError):
    """Not a host name or an IP address Paywarden can use."""


@dataclass(frozen=True)
class Target:
    """A request target in canonical form. Build it with `parse_target`, never by hand."""

    scheme: str  # "https" or "http"
    host: str  # lower-case A-label name, dotted-quad IPv4, or compressed IPv6 without brackets
    port: int
    path: str  # starts with "/"
    query: str | None = None  # without the "?"; None when there is none

    @property
    def default_port(self) -> bool:
        return DEFAULT_PORTS[self.scheme] == self.port

    @property
    def authority(self) -> str:
        """The Host header: the host (bracketed for IPv6) and the port unless it is the default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.default_port else f"{host}:{self.port}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port

    @property
    def request_target(self) -> str:
        """What goes on the request line: the path, and the query when there is one."""
        return self.path if self.query is None else f"{self.path}?{self.query}"

    @property
    def resource(self) -> str:
        """The URL without its query: what a payment is for."""
        return f"{self.scheme}://{self.authority}{self.path}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.request_target}"


# -- hosts ----------------------------------------------------------------------------------


def _label(label: str) -> str:
    if label.isascii() and not label.startswith("xn--"):
        if not _LABEL.match(label):
            raise InvalidHostName(f"{label!r} is not a host name label")
        return label
    try:
        # IDNA 2008 for a Unicode label; for an A-label, a check that it is a valid one.
        encoded = idna.alabel(label).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise InvalidHostName(f"{label!r} is not a valid internationalised label") from exc
    return encoded


def canonical_host(host: str) -> str:
    """The one spelling of a host: the resolver, the dial, the Host header, the allow-list and the
    records all use it. Raises InvalidHostName."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            address = parse_ip_literal(text)
        except InvalidHost as exc:
            raise InvalidHostName("not an IPv6 address") from exc
        assert address is not None
        return canonical(address)
    try:
        mapped = idna.uts46_remap(text, std3_rules=True, transitional=False)
    except (idna.IDNAError, UnicodeError) as exc:
        raise InvalidHostName(f"{host!r} is not a host name") from exc
    if mapped.endswith("."):
        mapped = mapped[:-1]
    if not mapped:
        raise InvalidHostName("empty host")
    try:
        # WHATWG order: a name that ends in a number is an IPv4 address in some spelling, or nothing.
        literal = parse_ip_literal(mapped)
    except InvalidHost as exc:
        raise InvalidHostName(f"{host!r} is not an IPv4 address") from exc
    if literal is not None:
        return canonical(literal)
    name = ".".join(_label(label) for label in mapped.split("."))
    if len(name) > MAX_HOST_LENGTH:
        raise InvalidHostName("host name too long")
    if "xn--" in name:
        # The HTTP client decodes a name with an A-label under IDNA 2008 as a whole, so every
        # label must pass that check (an ASCII `ab--c` beside one does not): judged is dialled.
        try:
            idna.decode(name)
        except (idna.IDNAError, UnicodeError) as exc:
            raise InvalidHostName(f"{host!r} is not a valid internationalised name") from exc
    return name


# -- paths and queries ----------------------------------------------------------------------


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))


def _escaped_byte(text: str, index: int) -> int:
    hex_digits = text[index + 1 : index + 3]
    if len(hex_digits) != 2 or any(ch not in _HEX for ch in hex_digits):
        raise refused(UrlProblem.MALFORMED_PERCENT)
    return int(hex_digits, 16)


def _path_escape(byte: int) -> str:
    """What an escaped byte in a path becomes, or the refusal it earns."""
    if byte == 0x00:
        raise refused(UrlProblem.NUL)
    if byte < 0x20 or byte == 0x7F:
        raise refused(UrlProblem.CONTROL_CHARACTER)
    if byte >= 0x80:
        raise refused(UrlProblem.NON_ASCII)
    char = chr(byte)
    if char in "/\\":
        raise refused(UrlProblem.ENCODED_SLASH)
    if char == ".":
        raise refused(UrlProblem.ENCODED_DOT)
    if char == "%":
        raise refused(UrlProblem.DOUBLE_ENCODING)
    if char == ";":
        raise refused(UrlProblem.PATH_PARAMETER)
    return char if char in _PATH_RAW else f"%{byte:02X}"


def _normalise_path_encoding(path: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(path):
        char = path[index]
        if char == "%":
            out.append(_path_escape(_escaped_byte(path, index)))
            index += 3
            continue
        if not char.isascii():
            raise refused(UrlProblem.NON_ASCII)
        if char == ";":
            raise refused(UrlProblem.PATH_PARAMETER)
        out.append(char if char in _PATH_RAW or char == "/" else _escape(char))
        index += 1
    return "".join(out)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4, for an absolute path."""
    output: list[str] = []
    segments = path.split("/")[1:]
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
        elif segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        else:
            output.append(segment)
    return "/" + "/".join(output)


def canonical_path(path: str) -> str:
    """A path as it is judged and sent, or InvalidInput(invalid_url) naming the problem."""
    if path == "":
        return "/"
    if not path.startswith("/"):
        raise refused(UrlProblem.SYNTAX)
    if "//" in path:
        # nginx merges slashes, others do not: /a//../b is /b to one server and /a/b to another.
        raise refused(UrlProblem.EMPTY_SEGMENT)
    normalised = remove_dot_segments(_normalise_path_encoding(path))
    if "//" in normalised:
        raise refused(UrlProblem.EMPTY_SEGMENT)
    return normalised


def canonical_path_prefix(prefix: str) -> str:
    """A path prefix typed by a person (a rule's condition, a challenge path), in the form paths are
    compared in. Raises InvalidInput(invalid_url) when it has no such form, ValueError when it holds
    dot segments (a prefix of what?)."""
    if not prefix.startswith("/"):
        raise refused(UrlProblem.SYNTAX)
    if "//" in prefix:
        raise refused(UrlProblem.EMPTY_SEGMENT)
    normalised = _normalise_path_encoding(prefix)
    if remove_dot_segments(normalised) != normalised:
        raise ValueError("a path prefix may not hold dot segments")
    return normalised


def canonical_query(query: str) -> str | None:
    out: list[str] = []
    index = 0
    while index < len(query):
        char = query[index]
        if char == "%":
            byte = _escaped_byte(query, index)
            if byte == 0x00:
                raise refused(UrlProblem.NUL)
            decoded = chr(byte)
            out.append(decoded if decoded in _UNRESERVED else f"%{byte:02X}")
            index += 3
            continue
        out.append(char if char in _QUERY_RAW else _escape(char))
        index += 1
    return "".join(out) or None


# -- whole URLs -----------------------------------------------------------------------------


def _split(url: str) -> SplitResult:
    if len(url) > MAX_URL_LENGTH or not url:
        raise refused(UrlProblem.SYNTAX)
    if "\\" in url:
        raise refused(UrlProblem.BACKSLASH)
    if "\x00" in url:
        raise refused(UrlProblem.NUL)
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise refused(UrlProblem.CONTROL_CHARACTER)
    if "%00" in url:
        raise refused(UrlProblem.NUL)
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError as exc:
        raise refused(UrlProblem.PORT if "Port" in str(exc) else UrlProblem.SYNTAX) from exc
    return parts


def parse_target(url: str) -> Target:
    """The canonical target of an absolute http(s) URL, or InvalidInput: `invalid_url` with a
    `urlProblem`, `https_required` for another scheme, `url_credentials` for a user or password."""
    parts = _split(url)
    scheme = parts.scheme.lower()
    if scheme and scheme not in DEFAULT_PORTS:
        raise InvalidInput(InputReason.HTTPS_REQUIRED)
    if not scheme or not parts.netloc:
        raise refused(UrlProblem.SYNTAX)
    if "@" in parts.netloc:
        raise InvalidInput(InputReason.URL_CREDENTIALS)
    if parts.hostname is None:
        raise refused(UrlProblem.HOST)
    if "%" in parts.netloc and ":" not in parts.hostname:
        raise refused(UrlProblem.HOST)  # escapes in a name: servers and resolvers disagree
    try:
        host = canonical_host(parts.hostname)
    except InvalidHostName as exc:
        raise refused(UrlProblem.HOST) from exc
    port = parts.port if parts.port is not None else DEFAULT_PORTS[scheme]
    if port == 0:
        raise refused(UrlProblem.PORT)
    return Target(scheme, host, port, canonical_path(parts.path), canonical_query(parts.query))


def resolve_reference(base: Target, location: str) -> Target:
    """Where a redirect's `Location` points, from `base`, in canonical form (or InvalidInput)."""
    text = location.strip()
    if "\\" in text:
        raise refused(UrlProblem.BACKSLASH)
    return parse_target(urljoin(base.url, text))
