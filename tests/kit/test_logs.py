"""What a log line keeps of a request target: everything but its credentials."""

from __future__ import annotations

import logging

import pytest

from server.kit.logs import RedactCredentials, redact_target


@pytest.mark.parametrize(
    ("target", "logged"),
    [
        ("/enroll/pw_en_abc-DEF_1", "/enroll/[redacted]"),
        ("/enroll/pw_en_abc/verify", "/enroll/[redacted]/verify"),
        ("/enroll/not-even-a-token", "/enroll/[redacted]"),
        ("/anything/pw%5Fat_abc", "/anything/[redacted]"),
        ("/callback?code=abc&state=s", "/callback?code=[redacted]&state=s"),
        (
            "/x?refresh_token=r&client_secret=c&a=b",
            "/x?refresh_token=[redacted]&client_secret=[redacted]&a=b",
        ),
        ("/x?next=pw_rt_abc", "/x?next=[redacted]"),
        ("/oauth/authorize?client_id=c&code_challenge=x", "/oauth/authorize?client_id=c&code_challenge=x"),
        ("/approvals/ap_123", "/approvals/ap_123"),
    ],
)
def test_a_request_target_loses_only_its_credentials(target: str, logged: str) -> None:
    assert redact_target(target) == logged


def test_our_tokens_are_scrubbed_from_any_line() -> None:
    record = logging.LogRecord(
        "paywarden", logging.INFO, __file__, 1, "token %s used", ("pw_at_secret",), None
    )
    assert RedactCredentials().filter(record)
    assert record.getMessage() == "token [redacted] used"
