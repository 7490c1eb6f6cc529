"""Test servers read a waited-for approval every 100 ms, so a test waits a tenth of what a person would."""

from __future__ import annotations

from pathlib import Path

from tests.support.paywarden import settings_for
from tests.support.processes import server_environ


def test_in_process_and_command_line_test_servers_poll_approvals_every_100_ms(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'paywarden.db'}"
    assert settings_for(database_url=url, port=8402).approval_poll_ms == 100
    environ = server_environ(database_url=url, public_url="http://127.0.0.1:8402", extra={})
    assert environ["PAYWARDEN_APPROVAL_POLL_MS"] == "100"
