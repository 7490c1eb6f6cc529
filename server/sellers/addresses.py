"""Which network addresses a seller may be reached at, and what an IP literal really means.

Two jobs, both pure:

- `parse_ip_literal` reads a URL's host the way a resolver library would if it were handed the
  host as a name. `inet_aton` accepts `2130706433`, `0177.0.0.1`, `0x7f.1` and `127.1` as
  127.0.0.1, so a host that looks like a number is parsed here as an IPv4 address (the WHATWG URL
  rules) and never given to DNS as a name. A malformed number (`1.2.3.256`, `08.1.1.1`) is not a
  host at all.
- `AddressPolicy.blocked_reason` judges one address. Link-local, unspecified, multicast, broadcast,
  reserved and documentation ranges are always blocked; loopback, RFC 1918, CGNAT and ULA only
  unless private hosts are allowed for development. IPv6 forms that carry an IPv4 address
  (IPv4-mapped, IPv4-compatible, NAT64, 6to4) are judged by the IPv4 address they carry as well.

Python's own `is_global` changed between patch releases and misses some of these ranges (it calls
`::1.2.3.4` and `64:ff9b:1::/48` global), so the ranges are spelled out here.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import unquote

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class InvalidHost(ValueError):
    """The host looks like an IP address but is not a valid one."""


def _networks(
    *specs: tuple[str, str],
) -> tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...]:
    return tuple((ipaddress.ip_network(cidr), reason) for cidr, reason in specs)


# Never reachable, whatever the development switch says.
ALWAYS_BLOCKED = _networks(
    ("0.0.0.0/8", "unspecified"),
    ("169.254.0.0/16", "link_local"),
    ("192.0.0.0/24", "reserved"),
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "reserved"),
    ("198.18.0.0/15", "reserved"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),  # includes 255.255.255.255, the broadcast address
    ("::/128", "unspecified"),
    ("100::/64", "reserved"),
    ("2001::/23", "reserved"),  # IETF protocol assignments, Teredo included
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "reserved"),
    ("fe80::/10", "link_local"),
    ("fec0::/10", "link_local"),  # deprecated site-local
    ("ff00::/8", "multicast"),
    # Cloud metadata services reachable at unique-local addresses: as dangerous as 169.254.169.254.
    ("fd00:ec2::254/128", "link_local"),
)

# Private networks: blocked unless PAYWARDEN_ALLOW_PRIVATE_HOSTS=1 (development only).
PRIVATE = _networks(
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("100.64.0.0/10", "cgnat"),
    ("::1/128", "loopback"),
    ("fc00::/7", "unique_local"),
)

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for or routes to, if it carries one."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or address in _NAT64_LOCAL or address in _IPV4_COMPATIBLE:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class AddressPolicy:
    allow_private: bool = False

    def blocked_reason(self, address: IPAddress) -> str | None:
        """None when a seller may be reached at `address`; otherwise why not."""
        if isinstance(address, ipaddress.IPv6Address):
            address = _without_zone(address)
            carried = embedded_ipv4(address)
            if carried is not None and int(address) > 1:  # "::" and "::1" are not IPv4-compatible
                reason = self.blocked_reason(carried)
                if reason is not None:
                    return reason
                if address.ipv4_mapped is not None or address in _IPV4_COMPATIBLE:
                    return None  # the same host as the IPv4 address just judged
        for network, reason in ALWAYS_BLOCKED:
            if address.version == network.version and address in network:
                return reason
        for network, reason in PRIVATE:
            if address.version == network.version and address in network:
                return None if self.allow_private else reason
        if isinstance(address, ipaddress.IPv6Address) and address in _NAT64_LOCAL:
            return None if self.allow_private else "private"
        if not address.is_global:
            return "reserved"
        return None

    def is_loopback(self, address: IPAddress) -> bool:
        if isinstance(address, ipaddress.IPv6Address):
            carried = address.ipv4_mapped
            if carried is not None:
                return carried.is_loopback
        return address.is_loopback


def _ipv4_number(part: str) -> int:
    if part == "":
        raise InvalidHost("empty part")
    if part[:2] in ("0x", "0X"):
        digits, base = part[2:], 16
        if digits == "":
            return 0
    elif len(part) > 1 and part.startswith("0"):
        digits, base = part[1:], 8
    else:
        digits, base = part, 10
    allowed = {10: "0123456789", 8: "01234567", 16: "0123456789abcdefABCDEF"}[base]
    if not digits or any(ch not in allowed for ch in digits):
        raise InvalidHost(f"{part!r} is not a number")
    return int(digits, base)


def _ends_in_number(labels: list[str]) -> bool:
    last = labels[-1]
    if last and last.isascii() and last.isdigit():
        return True
    try:
        _ipv4_number(last)
    except InvalidHost:
        return False
    return True


def parse_ipv4_any_spelling(host: str) -> ipaddress.IPv4Address | None:
    """An IPv4 address in any spelling `inet_aton` accepts, or None when `host` is a name."""
    labels = host.split(".")
    if labels and labels[-1] == "" and len(labels) > 1:
        labels = labels[:-1]
    if not labels or not _ends_in_number(labels):
        return None
    if len(labels) > 4:
        raise InvalidHost("too many parts")
    numbers = [_ipv4_number(label) for label in labels]
    if any(n > 255 for n in numbers[:-1]):
        raise InvalidHost("a part is over 255")
    if numbers[-1] >= 256 ** (5 - len(numbers)):
        raise InvalidHost("the last part is too large")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value += number * 256 ** (3 - index)
    return ipaddress.IPv4Address(value)


def parse_ip_literal(host: str) -> IPAddress | None:
    """The address a URL host names literally, or None when it is a name to resolve.

    Accepts the host as `urlsplit(...).hostname` or httpx gives it: lower-case or not, with or
    without IPv6 brackets, an IPv6 zone as `%25eth0` or `%eth0`. Raises InvalidHost for a host
    that tries to be an address and is not one.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(unquote(text))
        except ValueError as exc:
            raise InvalidHost("not an IPv6 address") from exc
    return parse_ipv4_any_spelling(text.lower())


def parse_resolved(address: str) -> IPAddress:
    """An address as a resolver returned it; anything else is refused as unusable."""
    try:
        return ipaddress.ip_address(address)
    except ValueError as exc:
        raise InvalidHost("the resolver returned something that is not an address") from exc


def canonical(address: IPAddress) -> str:
    """The spelling to dial: dotted quad or compressed IPv6, zone dropped (link-local never gets here)."""
    if isinstance(address, ipaddress.IPv6Address):
        return str(_without_zone(address))
    return str(address)


def _without_zone(address: ipaddress.IPv6Address) -> ipaddress.IPv6Address:
    return address if address.scope_id is None else ipaddress.IPv6Address(int(address))
