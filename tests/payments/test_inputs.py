"""fetch_paid's input guards: each refusal is invalid_input with its stable reason, before anything
is sent anywhere."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from server.kit.errors import InvalidInput
from server.payments.inputs import validate_fetch_paid

BEARER = "pw_at_" + "A" * 43
PUBLIC_HOST = "paywarden.example.com"
WALLET_KEY = "0x" + "4c0883a69102937d6231471b5dbb6204fe5129617082792ae468d01a3f362318"


def check(arguments: dict[str, Any], *, allow_private: bool = False, public_host: str = PUBLIC_HOST) -> Any:
    return validate_fetch_paid(
        arguments, bearer=BEARER, public_host=public_host, allow_private_hosts=allow_private
    )


def reason_of(arguments: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(InvalidInput) as caught:
        check(arguments, **kwargs)
    assert caught.value.code == "invalid_input"
    return caught.value.reason


OK_URL = "https://api.example.com/v1/report?q=1"

REFUSED: list[tuple[str, dict[str, Any], str]] = [
    ("missing url", {}, "invalid_url"),
    ("url not a string", {"url": 7}, "invalid_url"),
    ("url too long", {"url": "https://api.example.com/" + "a" * 2030}, "invalid_url"),
    ("no host", {"url": "https:///x"}, "invalid_url"),
    ("relative", {"url": "/x"}, "invalid_url"),
    ("white space", {"url": "https://api.example.com/a b"}, "invalid_url"),
    ("control character", {"url": "https://api.example.com/\x00"}, "invalid_url"),
    ("backslash", {"url": "https://api.example.com\\@evil.example/"}, "invalid_url"),
    ("bad port", {"url": "https://api.example.com:99999/"}, "invalid_url"),
    ("not an address", {"url": "https://1.2.3.256/"}, "invalid_url"),
    ("ftp", {"url": "ftp://api.example.com/x"}, "https_required"),
    ("http", {"url": "http://api.example.com/x"}, "https_required"),
    ("http to loopback without the switch", {"url": "http://127.0.0.1:9/x"}, "https_required"),
    ("user and password", {"url": "https://user:secret@api.example.com/"}, "url_credentials"),
    ("user only", {"url": "https://user@api.example.com/"}, "url_credentials"),
    ("paywarden itself", {"url": "https://paywarden.example.com/mcp"}, "paywarden_api_url"),
    ("paywarden, explicit port", {"url": "https://paywarden.example.com:443/mcp"}, "paywarden_api_url"),
    ("paywarden, other port", {"url": "https://paywarden.example.com:8443/x"}, "paywarden_api_url"),
    ("paywarden, upper case", {"url": "https://PAYWARDEN.example.com./x"}, "paywarden_api_url"),
    ("the agent's token in the URL", {"url": f"{OK_URL}&t={BEARER}"}, "contains_credential"),
    ("the token in a header", {"url": OK_URL, "headers": {"X-Token": BEARER}}, "contains_credential"),
    (
        "another Paywarden token",
        {"url": OK_URL, "body": "pw_rt_" + "b" * 30, "method": "POST"},
        "contains_credential",
    ),
    (
        "a wallet key in the body",
        {"url": OK_URL, "method": "POST", "body": f'{{"k": "{WALLET_KEY}"}}'},
        "contains_credential",
    ),
    ("a bare key in the query", {"url": f"{OK_URL}&k={WALLET_KEY[2:]}"}, "contains_credential"),
    (
        "a PEM key in a header",
        {"url": OK_URL, "headers": {"X-K": "-----BEGIN EC PRIVATE KEY-----"}},
        "contains_credential",
    ),
    ("the master key", {"url": OK_URL, "headers": {"X-K": "pwmk_" + "c" * 43}}, "contains_credential"),
    (
        "a key as the idempotency key",
        {"url": OK_URL, "idempotencyKey": WALLET_KEY[2:]},
        "contains_credential",
    ),
    ("Authorization", {"url": OK_URL, "headers": {"Authorization": "Bearer x"}}, "reserved_header"),
    ("PAYMENT-SIGNATURE", {"url": OK_URL, "headers": {"PAYMENT-SIGNATURE": "x"}}, "reserved_header"),
    ("X-PAYMENT", {"url": OK_URL, "headers": {"x-payment": "x"}}, "reserved_header"),
    ("X-PAYMENT-RESPONSE", {"url": OK_URL, "headers": {"X-Payment-Response": "x"}}, "reserved_header"),
    ("another payment header", {"url": OK_URL, "headers": {"Payment-Identifier": "x"}}, "reserved_header"),
    ("Host", {"url": OK_URL, "headers": {"Host": "evil.example"}}, "reserved_header"),
    ("proxy-*", {"url": OK_URL, "headers": {"Proxy-Authorization": "x"}}, "reserved_header"),
    ("x-org-api-key", {"url": OK_URL, "headers": {"X-Org-Api-Key": "x"}}, "reserved_header"),
    ("Connection", {"url": OK_URL, "headers": {"Connection": "close"}}, "reserved_header"),
    ("Transfer-Encoding", {"url": OK_URL, "headers": {"Transfer-Encoding": "chunked"}}, "reserved_header"),
    ("Upgrade", {"url": OK_URL, "headers": {"Upgrade": "h2c"}}, "reserved_header"),
    ("TE", {"url": OK_URL, "headers": {"TE": "trailers"}}, "reserved_header"),
    ("Keep-Alive", {"url": OK_URL, "headers": {"Keep-Alive": "1"}}, "reserved_header"),
    ("Content-Length", {"url": OK_URL, "headers": {"Content-Length": "1"}}, "reserved_header"),
    ("33 headers", {"url": OK_URL, "headers": {f"X-H{i}": "v" for i in range(33)}}, "too_many_headers"),
    ("headers not an object", {"url": OK_URL, "headers": ["a"]}, "invalid_header"),
    ("header value not a string", {"url": OK_URL, "headers": {"X-A": 1}}, "invalid_header"),
    ("header name with a space", {"url": OK_URL, "headers": {"X A": "1"}}, "invalid_header"),
    ("header value with a newline", {"url": OK_URL, "headers": {"X-A": "1\r\nHost: x"}}, "invalid_header"),
    ("body with GET", {"url": OK_URL, "body": "{}"}, "body_not_allowed"),
    ("body with HEAD", {"url": OK_URL, "method": "HEAD", "body": "{}"}, "body_not_allowed"),
    ("body over 256 KB", {"url": OK_URL, "method": "POST", "body": "a" * (256 * 1024 + 1)}, "body_too_large"),
    ("body not a string", {"url": OK_URL, "method": "POST", "body": {"a": 1}}, "invalid_body"),
    ("method", {"url": OK_URL, "method": "TRACE"}, "invalid_method"),
    ("negative max", {"url": OK_URL, "maxAmountUsd": "-1"}, "invalid_max_amount"),
    ("max not a number", {"url": OK_URL, "maxAmountUsd": "five"}, "invalid_max_amount"),
    ("max with 7 decimals", {"url": OK_URL, "maxAmountUsd": "0.0000001"}, "invalid_max_amount"),
    ("max as a boolean", {"url": OK_URL, "maxAmountUsd": True}, "invalid_max_amount"),
    ("max infinite", {"url": OK_URL, "maxAmountUsd": "Infinity"}, "invalid_max_amount"),
    ("short idempotency key", {"url": OK_URL, "idempotencyKey": "short"}, "invalid_idempotency_key"),
    (
        "idempotency key with a slash",
        {"url": OK_URL, "idempotencyKey": "abc/defgh"},
        "invalid_idempotency_key",
    ),
    ("origin", {"url": OK_URL, "origin": "robot"}, "invalid_origin"),
]


@pytest.mark.parametrize(("name", "arguments", "reason"), REFUSED, ids=[case[0] for case in REFUSED])
def test_refused_inputs_name_their_reason(name: str, arguments: dict[str, Any], reason: str) -> None:
    assert reason_of(arguments) == reason


def test_a_good_request_is_read_as_given() -> None:
    request = check(
        {
            "url": OK_URL,
            "method": "post",
            "headers": {"Content-Type": "application/json", "X-Trace": "1"},
            "body": '{"q": 1}',
            "idempotencyKey": "retry:abc-123.x",
            "maxAmountUsd": 0.05,
            "origin": "user",
        }
    )
    assert request.method == "POST"
    assert request.host == "api.example.com"
    assert request.path == "/v1/report"
    assert request.body == b'{"q": 1}'
    assert request.max_amount_usd == Decimal("0.05")
    assert request.headers == {"Content-Type": "application/json", "X-Trace": "1"}


def test_exactly_the_limits_are_accepted() -> None:
    check({"url": "https://api.example.com/" + "a" * (2048 - len("https://api.example.com/"))})
    check({"url": OK_URL, "headers": {f"X-H{i}": "v" for i in range(32)}})
    check({"url": OK_URL, "method": "PUT", "body": "a" * (256 * 1024)})


def test_http_only_to_loopback_and_only_with_the_switch() -> None:
    for url in ("http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::1]:9/x", "http://127.0.0.2/x"):
        assert check({"url": url}, allow_private=True).url == url
    assert reason_of({"url": "http://10.0.0.1/x"}, allow_private=True) == "https_required"
    assert reason_of({"url": "http://api.example.com/x"}, allow_private=True) == "https_required"


def test_other_programs_on_paywardens_loopback_are_not_paywarden() -> None:
    assert check({"url": "http://127.0.0.1:9000/x"}, allow_private=True, public_host="127.0.0.1:8402")
    assert (
        reason_of({"url": "http://127.0.0.1:8402/mcp"}, allow_private=True, public_host="127.0.0.1:8402")
        == "paywarden_api_url"
    )


def test_transaction_hashes_in_a_url_are_refused_too() -> None:
    # Documented trade-off: a 64-hex value could be a key, and a key must never leave.
    tx = "0x" + "ab" * 32
    assert reason_of({"url": f"{OK_URL}&tx={tx}"}) == "contains_credential"
