"""An agent's policy as an immutable value, and its JSON document form (camelCase, USD as strings).

Policies are versioned: every change stores a new document, and every decision records the
version it used.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from server.kit.money import format_usd, parse_usd
from server.policy.hosts import normalize_pattern

DEFAULT_MAX_USD_PER_TX = Decimal("1.00")
DEFAULT_DAILY_CAP_USD = Decimal("10.00")
DEFAULT_VELOCITY_WINDOW_SECONDS = 60


class PolicyError(ValueError):
    """A policy document or change that cannot be accepted; the message names the field."""


@dataclass(frozen=True)
class Velocity:
    max_tx: int | None = None
    max_usd: Decimal | None = None
    window_seconds: int = DEFAULT_VELOCITY_WINDOW_SECONDS


@dataclass(frozen=True)
class ChallengeRules:
    hosts: tuple[str, ...] = ()
    path_prefixes: tuple[str, ...] = ()
    max_usd: Decimal | None = None


@dataclass(frozen=True)
class Policy:
    version: int
    networks: tuple[str, ...]
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    max_usd_per_tx: Decimal = DEFAULT_MAX_USD_PER_TX
    daily_cap_usd: Decimal = DEFAULT_DAILY_CAP_USD
    step_up_threshold_usd: Decimal | None = None
    assets: tuple[str, ...] = ("USDC",)
    pay_to_deny: tuple[str, ...] = ()
    velocity: Velocity = field(default_factory=Velocity)
    challenge: ChallengeRules = field(default_factory=ChallengeRules)
    allow_catalog_hosts: bool = False
    verified_sellers_only: bool = False

    def to_document(self) -> dict[str, Any]:
        return {
            "allowHosts": list(self.allow_hosts),
            "denyHosts": list(self.deny_hosts),
            "maxUsdPerTx": format_usd(self.max_usd_per_tx),
            "dailyCapUsd": format_usd(self.daily_cap_usd),
            "stepUpThresholdUsd": _usd_or_none(self.step_up_threshold_usd),
            "networks": list(self.networks),
            "assets": list(self.assets),
            "payToDeny": list(self.pay_to_deny),
            "velocity": {
                "maxTx": self.velocity.max_tx,
                "maxUsd": _usd_or_none(self.velocity.max_usd),
                "windowSeconds": self.velocity.window_seconds,
            },
            "challenge": {
                "hosts": list(self.challenge.hosts),
                "pathPrefixes": list(self.challenge.path_prefixes),
                "maxUsd": _usd_or_none(self.challenge.max_usd),
            },
            "allowCatalogHosts": self.allow_catalog_hosts,
            "verifiedSellersOnly": self.verified_sellers_only,
        }

    @classmethod
    def from_document(cls, version: int, doc: dict[str, Any]) -> Policy:
        velocity = doc.get("velocity") or {}
        challenge = doc.get("challenge") or {}
        return cls(
            version=version,
            networks=tuple(doc["networks"]),
            allow_hosts=tuple(doc.get("allowHosts", ())),
            deny_hosts=tuple(doc.get("denyHosts", ())),
            max_usd_per_tx=Decimal(doc["maxUsdPerTx"]),
            daily_cap_usd=Decimal(doc["dailyCapUsd"]),
            step_up_threshold_usd=_decimal_or_none(doc.get("stepUpThresholdUsd")),
            assets=tuple(doc.get("assets", ("USDC",))),
            pay_to_deny=tuple(doc.get("payToDeny", ())),
            velocity=Velocity(
                max_tx=velocity.get("maxTx"),
                max_usd=_decimal_or_none(velocity.get("maxUsd")),
                window_seconds=int(velocity.get("windowSeconds", DEFAULT_VELOCITY_WINDOW_SECONDS)),
            ),
            challenge=ChallengeRules(
                hosts=tuple(challenge.get("hosts", ())),
                path_prefixes=tuple(challenge.get("pathPrefixes", ())),
                max_usd=_decimal_or_none(challenge.get("maxUsd")),
            ),
            allow_catalog_hosts=bool(doc.get("allowCatalogHosts", False)),
            verified_sellers_only=bool(doc.get("verifiedSellersOnly", False)),
        )

    def with_changes(self, **changes: Any) -> Policy:
        return replace(self, **changes)


def _usd_or_none(value: Decimal | None) -> str | None:
    return None if value is None else format_usd(value)


def _decimal_or_none(value: Any) -> Decimal | None:
    return None if value is None else Decimal(str(value))


def usd_setting(name: str, value: object) -> Decimal:
    try:
        return parse_usd(value)
    except ValueError as exc:
        raise PolicyError(f"{name}: {exc}") from exc


def host_patterns(name: str, values: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        try:
            pattern = normalize_pattern(value)
        except ValueError as exc:
            raise PolicyError(f"{name}: {exc}") from exc
        if pattern not in out:
            out.append(pattern)
    return tuple(out)
