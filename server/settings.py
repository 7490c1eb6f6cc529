"""Configuration: environment variables only (and a `.env` file), validated once at start-up.

Every problem becomes one line naming the variable, so a misconfigured server stops before it
serves anything. Values that look like a wallet private key are refused outright: keys are only
ever read by `paywarden admin wallet import --from-env VAR`, which names the variable it expects.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, DotEnvSettingsSource, SettingsConfigDict, SettingsError

from server.kit.crypto import MasterKey, MasterKeyError, MasterKeyMissing, read_master_key_file
from server.kit.sqlite_url import sqlite_file
from server.vocabulary import BASE as BASE  # re-exported: the networks are words of the vocabulary
from server.vocabulary import BASE_SEPOLIA as BASE_SEPOLIA
from server.vocabulary import SUPPORTED_NETWORKS as SUPPORTED_NETWORKS

ENV_PREFIX = "PAYWARDEN_"
# Without PAYWARDEN_MASTER_KEY, the key lives in this file next to the SQLite database.
MASTER_KEY_FILE_NAME = ".paywarden-master-key"

DEFAULT_USDC = {
    BASE: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
    BASE_SEPOLIA: "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
}
# Blocks mined on top of the one holding a transfer before it counts as settled (Base makes a block
# every 2 s): deep enough that a sequencer's reorganisation is behind us, short enough that a
# payment reads `settled` within half a minute.
DEFAULT_CONFIRMATIONS = {BASE: 10, BASE_SEPOLIA: 5}
MAX_CONFIRMATIONS = 1_000

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_PRIVATE_KEY_LIKE = re.compile(r"(?<![0-9a-fA-F])(0x)?[0-9a-fA-F]{64}(?![0-9a-fA-F])")
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
# Loopback addresses a public URL may be given as; it is kept under `localhost` instead, because a
# passkey needs a host name (browsers refuse an IP address as the WebAuthn RP id).
_LOOPBACK_ADDRESSES = {"127.0.0.1": "127.0.0.1", "::1": "[::1]"}
DEFAULT_PORT = 8402
DEFAULT_CDP_API_URL = "https://api.cdp.coinbase.com/platform"


class ConfigError(ValueError):
    """A one-line reason the configuration cannot be used."""


def looks_like_private_key(value: str) -> bool:
    return bool(_PRIVATE_KEY_LIKE.search(value))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", frozen=True, validate_default=True
    )

    database_url: str = "sqlite:///./paywarden.db"
    database_pool_size: int = Field(default=10, ge=1, le=100)
    public_url: str = f"http://localhost:{DEFAULT_PORT}"
    master_key: SecretStr | None = None
    rpc_urls: dict[str, str] = Field(default_factory=dict)
    assets: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_USDC))
    confirmations: dict[str, int] = Field(default_factory=lambda: dict(DEFAULT_CONFIRMATIONS))
    allow_private_hosts: bool = False
    max_response_bytes: int = Field(default=1_048_576, ge=1, le=10_485_760)
    fetch_timeout_ms: int = Field(default=30_000, ge=1_000, le=120_000)
    approval_wait_ms: int = Field(default=40_000, ge=0, le=600_000)
    # How often that wait reads the database for the decision (any process may have written it).
    approval_poll_ms: int = Field(default=2_000, ge=50, le=60_000)
    # How long a wallet's balance, once read, is known to a process (0: read before every payment).
    balance_cache_ms: int = Field(default=5_000, ge=0, le=60_000)
    # How long fetch_paid may wait for its one look at the chain when the seller named the
    # transaction (0: never; the answer says `pending` and the check runs in the background).
    settlement_wait_ms: int = Field(default=0, ge=0, le=10_000)
    slack_webhook_url: SecretStr | None = None
    log_format: Literal["console", "json"] = "console"
    # A bearer token /metrics asks for; without it /metrics is open (for a scraper in the cluster).
    metrics_token: SecretStr | None = None
    background_jobs: bool = True
    # How long `serve` may take to stop after SIGTERM: calls in flight finish (a wait for a person
    # ends at once), then the process lets its leases go and exits. Below Kubernetes' 30 s.
    shutdown_grace_seconds: int = Field(default=25, ge=2, le=3600)
    # The authorization server: lifetimes of what it issues, and its abuse limits.
    access_token_ttl: int = Field(default=3600, ge=300, le=86_400)
    refresh_token_ttl: int = Field(default=30 * 86_400, ge=3600, le=365 * 86_400)
    refresh_grace_seconds: int = Field(default=10, ge=0, le=60)
    session_ttl: int = Field(default=12 * 3600, ge=600, le=30 * 86_400)
    enroll_ttl: int = Field(default=86_400, ge=600, le=30 * 86_400)
    # How long a passkey confirmation (sudo) lets a session make changes that widen authority.
    sudo_seconds: int = Field(default=300, ge=30, le=3600)
    rate_limit_sign_in: int = Field(default=20, ge=1, le=10_000)
    rate_limit_register: int = Field(default=20, ge=1, le=10_000)
    rate_limit_token: int = Field(default=120, ge=1, le=100_000)
    rate_limit_authorize: int = Field(default=60, ge=1, le=10_000)
    rate_limit_admin_api: int = Field(default=600, ge=1, le=100_000)
    client_document_failure_ttl: int = Field(default=300, ge=0, le=86_400)
    # Coinbase CDP's API, which holds the keys of `cdp` wallets (tests point it at a stand-in).
    cdp_api_url: str = DEFAULT_CDP_API_URL

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, value: str) -> str:
        if not (value.startswith("sqlite:///") or value.startswith("postgresql+psycopg://")):
            raise ValueError("must be sqlite:///PATH or postgresql+psycopg://...")
        return value

    @field_validator("public_url")
    @classmethod
    def _public_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL such as https://paywarden.example.com")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("must not carry credentials, a query or a fragment")
        if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
            raise ValueError("must be https:// (http:// only on a loopback host)")
        if parts.hostname in _LOOPBACK_ADDRESSES:
            port = f":{parts.port}" if parts.port else ""
            value = f"{parts.scheme}://localhost{port}{parts.path}"
        return value.rstrip("/")

    @field_validator("rpc_urls")
    @classmethod
    def _rpc_urls(cls, value: dict[str, str]) -> dict[str, str]:
        for network, url in value.items():
            _check_network(network)
            if urlsplit(url).scheme not in ("http", "https"):
                raise ValueError(f"the RPC URL for {network} must be http(s)")
        return value

    @field_validator("assets")
    @classmethod
    def _assets(cls, value: dict[str, str]) -> dict[str, str]:
        merged = dict(DEFAULT_USDC)
        for network, address in value.items():
            _check_network(network)
            if not _ADDRESS.match(address):
                raise ValueError(f"the USDC address for {network} must be 0x and 40 hex digits")
            merged[network] = address
        return merged

    @field_validator("confirmations")
    @classmethod
    def _confirmations(cls, value: dict[str, int]) -> dict[str, int]:
        merged = dict(DEFAULT_CONFIRMATIONS)
        for network, depth in value.items():
            _check_network(network)
            if isinstance(depth, bool) or not 0 <= depth <= MAX_CONFIRMATIONS:
                raise ValueError(f"the confirmations for {network} must be 0 to {MAX_CONFIRMATIONS} blocks")
            merged[network] = depth
        return merged

    @field_validator("cdp_api_url")
    @classmethod
    def _cdp_api_url(cls, value: str) -> str:
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"must be an https URL such as {DEFAULT_CDP_API_URL}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError("must not carry credentials, a query or a fragment")
        if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
            raise ValueError("must be https:// (http:// only on a loopback host, for a local stand-in)")
        return value.strip().rstrip("/")

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters (openssl rand -base64 32 makes one)")
        return value

    @field_validator("slack_webhook_url")
    @classmethod
    def _slack(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is None or value.get_secret_value().startswith("https://hooks.slack.com/services/"):
            return value
        # Tests only: a receiver on this machine's loopback, when private hosts are allowed.
        parts = urlsplit(value.get_secret_value())
        if info.data.get("allow_private_hosts") and parts.scheme == "http" and parts.hostname == "127.0.0.1":
            return value
        raise ValueError("must be a https://hooks.slack.com/services/... URL")

    @property
    def mcp_url(self) -> str:
        return f"{self.public_url}/mcp"

    @property
    def admin_api_audience(self) -> str:
        return f"{self.public_url}/api/v1"

    @property
    def resource_metadata_url(self) -> str:
        return f"{self.public_url}/.well-known/oauth-protected-resource/mcp"

    @property
    def public_host(self) -> str:
        return urlsplit(self.public_url).netloc

    @property
    def pages_url(self) -> str:
        """Where people's pages live: the public URL (a loopback address is kept as `localhost`)."""
        return self.public_url

    def loopback_alias(self, netloc: str) -> str | None:
        """The origin `http://NETLOC` when NETLOC is the public URL's other loopback spelling
        (127.0.0.1 or [::1] with the same port, for a public URL on localhost), else None.

        A client given `http://127.0.0.1:PORT/mcp` checks that the resource metadata names that
        URL (RFC 9728 section 3.3), so discovery answers it under the spelling it was asked by."""
        public = urlsplit(self.public_url)
        if public.scheme != "http" or public.hostname != "localhost" or public.path:
            return None
        port = f":{public.port}" if public.port else ""
        for spelling in _LOOPBACK_ADDRESSES.values():
            if netloc.lower() == f"{spelling}{port}":
                return f"http://{netloc.lower()}"
        return None

    def resource_aliases(self) -> frozenset[str]:
        """The MCP URL under each other loopback spelling: the same resource, by another name."""
        public = urlsplit(self.public_url)
        port = f":{public.port}" if public.port else ""
        found = {
            f"{origin}/mcp"
            for spelling in _LOOPBACK_ADDRESSES.values()
            if (origin := self.loopback_alias(f"{spelling}{port}")) is not None
        }
        return frozenset(found)

    @property
    def rp_id(self) -> str:
        """The WebAuthn relying party id: the pages' host name."""
        return urlsplit(self.pages_url).hostname or "localhost"

    @property
    def pages_origin(self) -> str:
        parts = urlsplit(self.pages_url)
        return f"{parts.scheme}://{parts.netloc}"

    @property
    def secure_cookies(self) -> bool:
        return self.pages_url.startswith("https://")

    @property
    def master_key_file(self) -> Path | None:
        """Where the master key is kept when PAYWARDEN_MASTER_KEY is not set: next to the SQLite
        database file, whatever the working directory. None when there is no such file (PostgreSQL,
        or SQLite in memory): the key must then come from PAYWARDEN_MASTER_KEY."""
        path = None if self.master_key is not None else sqlite_file(self.database_url)
        return None if path is None else path.parent / MASTER_KEY_FILE_NAME

    @property
    def master_key_name(self) -> str:
        """How an error names the master key in use."""
        if self.master_key is not None:
            return "PAYWARDEN_MASTER_KEY"
        return f"the master key file {self.master_key_file}"

    @cached_property
    def master(self) -> MasterKey:
        """The configured master key. A missing key file is MasterKeyMissing: only the start-up
        check (server/services.py) creates one, once it knows the database holds no sealed secret."""
        if self.master_key is not None:
            return MasterKey.parse(self.master_key.get_secret_value())
        path = self.master_key_file
        if path is None:
            raise MasterKeyError(
                "PAYWARDEN_MASTER_KEY is required with PostgreSQL: every process of a deployment "
                "needs the same key, and there is no database file to keep it next to"
            )
        return read_master_key_file(path)

    def usdc_address(self, network: str) -> str | None:
        return self.assets.get(network)


def _check_network(network: str) -> None:
    if network not in SUPPORTED_NETWORKS:
        raise ValueError(f"{network!r} is not a supported network ({', '.join(SUPPORTED_NETWORKS)})")


def _configured_values(environ: Mapping[str, str]) -> Iterable[tuple[str, str]]:
    for name, value in environ.items():
        if name.upper().startswith(ENV_PREFIX):
            yield name.upper(), value
    dotenv = Path(".env")
    if dotenv.is_file():
        for dotenv_name, dotenv_value in DotEnvSettingsSource(Settings, env_file=dotenv).env_vars.items():
            if dotenv_name.upper().startswith(ENV_PREFIX):
                yield dotenv_name.upper(), dotenv_value or ""


def is_configured(name: str, *, environ: Mapping[str, str] | None = None) -> bool:
    """Whether a variable is set, in the environment or the `.env` file."""
    env = os.environ if environ is None else environ
    return any(found == name.upper() and value for found, value in _configured_values(env))


def load_settings(*, exempt: Iterable[str] = (), environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the configuration, or raise ConfigError with a one-line reason."""
    env = os.environ if environ is None else environ
    allowed = {name.upper() for name in exempt}
    for name, value in _configured_values(env):
        if name not in allowed and looks_like_private_key(value):
            raise ConfigError(
                f"{name} looks like a private key; wallet keys never go in configuration "
                "(import one with: paywarden admin wallet import AGENT --from-env VAR)"
            )
    try:
        settings = Settings(**_overrides(env)) if environ is not None else Settings()
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None
    try:
        _ = settings.master
    except MasterKeyMissing:
        pass  # created on first start, once the database is known to hold no sealed secret
    except (MasterKeyError, OSError) as exc:
        raise ConfigError(str(exc)) from None
    return settings


def _overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """Settings from an explicit mapping (tests), bypassing the process environment."""
    import json

    out: dict[str, Any] = {}
    for field in Settings.model_fields:
        raw = environ.get(ENV_PREFIX + field.upper())
        if raw is None:
            continue
        out[field] = json.loads(raw) if field in ("rpc_urls", "assets", "confirmations") else raw
    return out


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else "configuration"
    message = first["msg"].removeprefix("Value error, ")
    return f"{ENV_PREFIX}{field.upper()}: {message}"


class ProbeSettings(BaseSettings):
    """The few settings `paywarden doctor` reads: it runs with no database, account or key.

    Same variables, same validation as Settings: the RPC URLs and assets (for balances), the
    deadline of the exchange with the seller, and the private-hosts switch.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_file=".env", extra="ignore", frozen=True, validate_default=True
    )

    rpc_urls: dict[str, str] = Field(default_factory=dict)
    assets: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_USDC))
    allow_private_hosts: bool = False
    fetch_timeout_ms: int = Field(default=30_000, ge=1_000, le=120_000)

    @field_validator("rpc_urls")
    @classmethod
    def _rpc_urls(cls, value: dict[str, str]) -> dict[str, str]:
        return Settings._rpc_urls(value)

    @field_validator("assets")
    @classmethod
    def _assets(cls, value: dict[str, str]) -> dict[str, str]:
        return Settings._assets(value)


PROBE_VARIABLES = tuple(ENV_PREFIX + name.upper() for name in ProbeSettings.model_fields)


def load_probe_settings(*, environ: Mapping[str, str] | None = None) -> ProbeSettings:
    """doctor's settings, or ConfigError with a one-line reason. Only its own variables are read."""
    env = os.environ if environ is None else environ
    for name, value in _configured_values(env):
        if name in PROBE_VARIABLES and looks_like_private_key(value):
            raise ConfigError(f"{name} looks like a private key; wallet keys never go in configuration")
    try:
        return ProbeSettings() if environ is None else ProbeSettings(**_probe_overrides(environ))
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None
    except (SettingsError, ValueError):
        raise ConfigError(f"{ENV_PREFIX}RPC_URLS and {ENV_PREFIX}ASSETS must be JSON objects") from None


def _probe_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in ProbeSettings.model_fields:
        raw = environ.get(ENV_PREFIX + field.upper())
        if raw is not None:
            out[field] = json.loads(raw) if field in ("rpc_urls", "assets") else raw
    return out
