"""Settings: validated at start-up with one-line errors; keys never in configuration."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest

from server.kit.crypto import MasterKey, MasterKeyError, SealError, load_or_create_master_key_file
from server.settings import ConfigError, load_settings
from tests.support.paywarden import TEST_MASTER_KEY

KEY = MasterKey(b"\x01" * 32).encode()


@pytest.mark.parametrize(
    ("environ", "fragment"),
    [
        ({"PAYWARDEN_FETCH_TIMEOUT_MS": "500"}, "PAYWARDEN_FETCH_TIMEOUT_MS"),
        ({"PAYWARDEN_MAX_RESPONSE_BYTES": "20000000"}, "PAYWARDEN_MAX_RESPONSE_BYTES"),
        ({"PAYWARDEN_PUBLIC_URL": "http://paywarden.example.com"}, "https"),
        ({"PAYWARDEN_PUBLIC_URL": "https://user:pw@paywarden.example.com"}, "credentials"),
        ({"PAYWARDEN_DATABASE_URL": "mysql://x"}, "PAYWARDEN_DATABASE_URL"),
        ({"PAYWARDEN_RPC_URLS": '{"eip155:1": "http://x"}'}, "not a supported network"),
        ({"PAYWARDEN_ASSETS": '{"eip155:8453": "0x12"}'}, "40 hex"),
        ({"PAYWARDEN_LOG_FORMAT": "xml"}, "PAYWARDEN_LOG_FORMAT"),
        ({"PAYWARDEN_SLACK_WEBHOOK_URL": "https://evil.example/hook"}, "hooks.slack.com"),
        (
            {"PAYWARDEN_CDP_API_URL": "http://api.cdp.example.com/platform"},
            "PAYWARDEN_CDP_API_URL: must be https",
        ),
        ({"PAYWARDEN_CDP_API_URL": "ftp://api.cdp.example.com"}, "PAYWARDEN_CDP_API_URL"),
        ({"PAYWARDEN_CDP_API_URL": "https://key:secret@api.cdp.example.com"}, "credentials"),
        ({"PAYWARDEN_CDP_API_URL": "https://api.cdp.example.com/platform?x=1"}, "a query"),
        ({"PAYWARDEN_MASTER_KEY": "0x" + "ab" * 32}, "looks like a private key"),
        ({"PAYWARDEN_MASTER_KEY": "pwmk_short"}, "PAYWARDEN_MASTER_KEY"),
        ({"PAYWARDEN_MASTER_KEY": "pwmk_AAAA"}, "32 bytes"),
        ({"PAYWARDEN_MASTER_KEY": "secret"}, "pwmk_"),
        (
            {"PAYWARDEN_RPC_URLS": '{"eip155:84532": "http://rpc/' + "cd" * 32 + '"}'},
            "looks like a private key",
        ),
    ],
)
def test_invalid_or_unsafe_values_stop_with_one_line(environ: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(environ={"PAYWARDEN_MASTER_KEY": KEY, **environ})
    message = str(caught.value)
    assert fragment in message
    assert "\n" not in message


def test_a_variable_named_for_import_may_hold_a_key() -> None:
    key = "0x" + "ab" * 32
    settings = load_settings(
        exempt=["PAYWARDEN_IMPORT_ME"], environ={"PAYWARDEN_MASTER_KEY": KEY, "PAYWARDEN_IMPORT_ME": key}
    )
    assert settings.public_url == "http://localhost:8402"


def test_defaults_and_derived_urls() -> None:
    settings = load_settings(
        environ={"PAYWARDEN_MASTER_KEY": KEY, "PAYWARDEN_PUBLIC_URL": "https://pw.example.com/"}
    )
    assert settings.mcp_url == "https://pw.example.com/mcp"
    assert settings.resource_metadata_url == "https://pw.example.com/.well-known/oauth-protected-resource/mcp"
    assert settings.assets["eip155:8453"].lower() == "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913"
    assert settings.fetch_timeout_ms == 30_000


def test_the_master_key_file_is_created_0600_once(tmp_path: Path) -> None:
    path = tmp_path / ".paywarden-master-key"
    first = load_or_create_master_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("pwmk_")
    assert load_or_create_master_key_file(path).encode() == first.encode()


def test_a_master_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ".paywarden-master-key"
    load_or_create_master_key_file(path)
    os.chmod(path, 0o644)
    with pytest.raises(MasterKeyError, match="chmod 600"):
        load_or_create_master_key_file(path)


def test_a_reader_never_sees_an_empty_or_partial_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the key is being written (made slow here), the file's name shows nothing or all of it."""
    path = tmp_path / ".paywarden-master-key"
    seen: list[str] = []
    stop = threading.Event()

    def read_again_and_again() -> None:
        while not stop.is_set():
            try:
                seen.append(path.read_text())
            except FileNotFoundError:
                continue

    encode = MasterKey.encode

    def slow_encode(key: MasterKey) -> str:
        time.sleep(0.2)
        return encode(key)

    monkeypatch.setattr(MasterKey, "encode", slow_encode)
    reader = threading.Thread(target=read_again_and_again)
    reader.start()
    try:
        created = load_or_create_master_key_file(path)
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.01)  # bounded: until the reader has read the finished file once
    finally:
        stop.set()
        reader.join(timeout=10)
    monkeypatch.undo()
    assert seen
    assert set(seen) == {created.encode() + "\n"}


def test_the_default_key_file_is_next_to_the_sqlite_database(tmp_path: Path) -> None:
    absolute = load_settings(environ={"PAYWARDEN_DATABASE_URL": f"sqlite:///{tmp_path}/data/pw.db"})
    assert absolute.master_key_file == tmp_path / "data" / ".paywarden-master-key"
    relative = load_settings(environ={"PAYWARDEN_DATABASE_URL": "sqlite:///./pw.db"})
    assert relative.master_key_file == Path.cwd() / ".paywarden-master-key"
    with_variable = load_settings(environ={"PAYWARDEN_MASTER_KEY": KEY})
    assert with_variable.master_key_file is None
    assert with_variable.master_key_name == "PAYWARDEN_MASTER_KEY"


def test_postgres_without_the_master_key_variable_is_refused() -> None:
    with pytest.raises(ConfigError, match="PAYWARDEN_MASTER_KEY is required with PostgreSQL"):
        load_settings(environ={"PAYWARDEN_DATABASE_URL": "postgresql+psycopg://u@h/db"})


def test_derived_keys_differ_by_purpose_and_reveal_nothing_of_the_key() -> None:
    key = MasterKey(b"\x01" * 32)
    assert key.derive("a") != key.derive("b")
    assert key.derive("a") == MasterKey(b"\x01" * 32).derive("a")
    assert key.check_value() != MasterKey(b"\x02" * 32).check_value()
    assert bytes.fromhex(key.check_value()) != b"\x01" * 32


def test_sealed_values_open_only_with_the_same_key_and_context() -> None:
    key = MasterKey.generate()
    sealed = key.seal(b"secret", context="slack-webhook:org_1")
    assert key.open(sealed, context="slack-webhook:org_1") == b"secret"
    with pytest.raises(SealError):
        key.open(sealed, context="slack-webhook:org_2")
    with pytest.raises(SealError):
        MasterKey.generate().open(sealed, context="slack-webhook:org_1")
    tampered = sealed[:-1] + bytes([sealed[-1] ^ 1])
    with pytest.raises(SealError):
        key.open(tampered, context="slack-webhook:org_1")
    assert MasterKey.parse(key.encode()).open(sealed, context="slack-webhook:org_1") == b"secret"


def test_the_database_pool_size_is_bounded() -> None:
    base = {"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY}
    assert load_settings(environ=base).database_pool_size == 10
    assert load_settings(environ={**base, "PAYWARDEN_DATABASE_POOL_SIZE": "4"}).database_pool_size == 4
    for bad in ("0", "101", "many"):
        with pytest.raises(ConfigError, match="PAYWARDEN_DATABASE_POOL_SIZE"):
            load_settings(environ={**base, "PAYWARDEN_DATABASE_POOL_SIZE": bad})


def test_the_approval_poll_interval_is_a_bounded_setting() -> None:
    base = {"PAYWARDEN_MASTER_KEY": TEST_MASTER_KEY}
    assert load_settings(environ=base).approval_poll_ms == 2_000
    assert load_settings(environ={**base, "PAYWARDEN_APPROVAL_POLL_MS": "100"}).approval_poll_ms == 100
    for bad in ("0", "49", "60001", "often"):
        with pytest.raises(ConfigError, match="PAYWARDEN_APPROVAL_POLL_MS"):
            load_settings(environ={**base, "PAYWARDEN_APPROVAL_POLL_MS": bad})


def test_the_cdp_api_is_coinbases_unless_set_and_http_only_on_loopback() -> None:
    assert (
        load_settings(environ={"PAYWARDEN_MASTER_KEY": KEY}).cdp_api_url
        == "https://api.cdp.coinbase.com/platform"
    )
    for given, kept in [
        ("https://cdp.example.com/platform/", "https://cdp.example.com/platform"),
        ("http://127.0.0.1:9000/platform", "http://127.0.0.1:9000/platform"),
    ]:
        settings = load_settings(environ={"PAYWARDEN_MASTER_KEY": KEY, "PAYWARDEN_CDP_API_URL": given})
        assert settings.cdp_api_url == kept
