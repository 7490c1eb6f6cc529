"""The canonical request target: one spelling of a host, one form of a path, and a refusal, naming
the problem, for what servers read differently."""

from __future__ import annotations

import pytest

from server.kit.errors import InvalidInput
from server.policy.hosts import normalize_host, normalize_pattern
from server.sellers.urls import (
    Target,
    canonical_host,
    canonical_path_prefix,
    parse_target,
    remove_dot_segments,
    resolve_reference,
)

SAME: list[tuple[str, str]] = [
    # dot segments, as servers resolve them
    ("https://h.example/free/../premium", "https://h.example/premium"),
    ("https://h.example/a/./b/../c", "https://h.example/a/c"),
    ("https://h.example/../../premium", "https://h.example/premium"),
    ("https://h.example/a/..", "https://h.example/"),
    ("https://h.example/a/.", "https://h.example/a/"),
    ("https://h.example", "https://h.example/"),
    # escapes of unreserved characters decoded, others upper-case
    ("https://h.example/%70remium", "https://h.example/premium"),
    ("https://h.example/%7euser", "https://h.example/~user"),
    ("https://h.example/a%2db%5f", "https://h.example/a-b_"),
    ("https://h.example/a%21%40%3a%2C", "https://h.example/a!@:,"),
    ("https://h.example/a%20b", "https://h.example/a%20b"),
    ("https://h.example/a%3fb%23c", "https://h.example/a%3Fb%23c"),
    ("https://h.example/a{b}|c", "https://h.example/a%7Bb%7D%7Cc"),
    # queries keep their order and their reserved escapes
    ("https://h.example/x?b=%2f&a=%41&c=%26", "https://h.example/x?b=%2F&a=A&c=%26"),
    ("https://h.example/x?q=caf%c3%a9", "https://h.example/x?q=caf%C3%A9"),
    ("https://h.example/x?q=café", "https://h.example/x?q=caf%C3%A9"),
    ("https://h.example/x?q=100%25", "https://h.example/x?q=100%25"),
    ("https://h.example/x?", "https://h.example/x"),
    ("https://h.example/x#frag", "https://h.example/x"),
    # hosts and ports
    ("HTTPS://API.Example.COM./x", "https://api.example.com/x"),
    ("https://h.example:443/x", "https://h.example/x"),
    ("https://h.example:0443/x", "https://h.example/x"),
    ("https://h.example:8443/x", "https://h.example:8443/x"),
    ("https://faß.de/x", "https://xn--fa-hia.de/x"),
    ("https://FAß.DE./x", "https://xn--fa-hia.de/x"),
    ("https://xn--fa-hia.de/x", "https://xn--fa-hia.de/x"),
    ("https://ＡＰＩ。example.com/x", "https://api.example.com/x"),
    ("https://bücher.de/x", "https://xn--bcher-kva.de/x"),
    ("https://0x7f.1:8443/x", "https://127.0.0.1:8443/x"),
    ("https://2130706433/x", "https://127.0.0.1/x"),
    ("https://１２７.０.０.１/x", "https://127.0.0.1/x"),
    ("https://[::1]:9/x", "https://[::1]:9/x"),
    ("https://[0:0:0:0:0:0:0:1]/x", "https://[::1]/x"),
    ("https://[fe80::1%25eth0]/x", "https://[fe80::1]/x"),
    ("https://r3---sn-abc.example.com/x", "https://r3---sn-abc.example.com/x"),
]


@pytest.mark.parametrize(("given", "canonical"), SAME)
def test_one_canonical_form(given: str, canonical: str) -> None:
    target = parse_target(given)
    assert target.url == canonical
    # Canonical is a fixed point: reading it again changes nothing.
    assert parse_target(target.url) == target


REFUSED: list[tuple[str, str, str | None]] = [
    ("https://h.example/a%2Fb", "invalid_url", "encoded_slash"),
    ("https://h.example/a%2fb", "invalid_url", "encoded_slash"),
    ("https://h.example/a%5Cb", "invalid_url", "encoded_slash"),
    ("https://h.example/a/%2e%2e/premium", "invalid_url", "encoded_dot"),
    ("https://h.example/%2E", "invalid_url", "encoded_dot"),
    ("https://h.example/%2570remium", "invalid_url", "double_encoding"),
    ("https://h.example/a%00", "invalid_url", "nul"),
    ("https://h.example/x?q=%00", "invalid_url", "nul"),
    ("https://h.example/x#%00", "invalid_url", "nul"),
    ("https://h.example/a\\b", "invalid_url", "backslash"),
    ("https://h.example\\@evil.example/", "invalid_url", "backslash"),
    ("https://h.example/premium;x=1", "invalid_url", "path_parameter"),
    ("https://h.example/premium%3bx", "invalid_url", "path_parameter"),
    ("https://h.example//premium", "invalid_url", "empty_segment"),
    ("https://h.example/a//../premium", "invalid_url", "empty_segment"),
    ("https://h.example/café", "invalid_url", "non_ascii"),
    ("https://h.example/caf%C3%A9", "invalid_url", "non_ascii"),
    ("https://h.example/%C0%AE%C0%AE/x", "invalid_url", "non_ascii"),  # overlong dots
    ("https://h.example/a%0Ab", "invalid_url", "control_character"),
    ("https://h.example/a b", "invalid_url", "control_character"),
    ("https://h.example/a\tb", "invalid_url", "control_character"),
    ("https://h.example/a%zz", "invalid_url", "malformed_percent"),
    ("https://h.example/a%4", "invalid_url", "malformed_percent"),
    ("https://h.example/x?q=%g1", "invalid_url", "malformed_percent"),
    ("https://ex%61mple.com/", "invalid_url", "host"),
    ("https://a_b.example/", "invalid_url", "host"),
    ("https://xn--zz.example/", "invalid_url", "host"),
    ("https://faß.ab--c.example/", "invalid_url", "host"),  # IDNA 2008 refuses ab--c beside an A-label
    ("https://xn--fa-hia.ab--c.example/", "invalid_url", "host"),
    ("https://a..b/", "invalid_url", "host"),
    ("https://1.2.3.256/", "invalid_url", "host"),
    ("https://seller.123/", "invalid_url", "host"),
    ("https://h.example:0/", "invalid_url", "port"),
    ("https://h.example:99999/", "invalid_url", "port"),
    ("/premium", "invalid_url", "syntax"),
    ("https:///x", "invalid_url", "syntax"),
    ("ftp://h.example/", "https_required", None),
    ("https://user@h.example/", "url_credentials", None),
]


@pytest.mark.parametrize(("url", "reason", "problem"), REFUSED)
def test_ambiguous_spellings_are_refused_naming_the_problem(
    url: str, reason: str, problem: str | None
) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_target(url)
    assert caught.value.reason == reason
    assert caught.value.extra.get("urlProblem") == problem


def test_what_goes_on_the_wire() -> None:
    target = parse_target("https://API.example.com.:8443/a/../b%7e?x=%41")
    assert target == Target("https", "api.example.com", 8443, "/b~", "x=A")
    assert target.authority == "api.example.com:8443"
    assert target.request_target == "/b~?x=A"
    assert target.resource == "https://api.example.com:8443/b~"
    assert parse_target("https://[::1]/x").authority == "[::1]"


def test_rfc_3986_dot_segment_examples() -> None:
    # RFC 3986 section 5.2.4 and 5.4.2, on absolute paths.
    assert remove_dot_segments("/a/b/c/./../../g") == "/a/g"
    assert remove_dot_segments("/b/c/d;p/../../../g") == "/g"
    assert remove_dot_segments("/b/c/./g/.") == "/b/c/g/"
    assert remove_dot_segments("/b/c/g/..") == "/b/c/"
    assert remove_dot_segments("/b/c/g..") == "/b/c/g.."


def test_one_spelling_of_a_host_for_people_and_for_urls() -> None:
    # IDNA 2008 (UTS 46, non-transitional): faß.de is its own domain, never fass.de.
    assert canonical_host("faß.de") == "xn--fa-hia.de"
    assert canonical_host("faß.de") != canonical_host("fass.de")
    assert normalize_pattern("FAß.de.") == parse_target("https://faß.de/").host
    assert normalize_pattern("*.Bücher.DE") == "*.xn--bcher-kva.de"
    assert normalize_host("0x7f.1") == "127.0.0.1"
    assert normalize_pattern("2130706433") == parse_target("https://127.1/").host


def test_redirects_resolve_against_the_canonical_target() -> None:
    base = parse_target("https://h.example/go/here")
    assert resolve_reference(base, "../premium").url == "https://h.example/premium"
    assert resolve_reference(base, "/free/../%70remium?x").url == "https://h.example/premium?x"
    assert resolve_reference(base, "HTTPS://H.EXAMPLE.:443/x").origin == base.origin
    with pytest.raises(InvalidInput):
        resolve_reference(base, "/a%2Fb")
    with pytest.raises(InvalidInput):
        resolve_reference(base, "/\\evil.example/")


def test_path_prefixes_typed_by_people_take_the_same_form() -> None:
    assert canonical_path_prefix("/%7Euser/") == "/~user/"
    assert canonical_path_prefix("/v1/search") == "/v1/search"
    with pytest.raises(InvalidInput):
        canonical_path_prefix("/a%2Fb")
    with pytest.raises(ValueError, match="dot segments"):
        canonical_path_prefix("/a/../b")
