"""Principals tests act as when they reach into the services directly."""

from __future__ import annotations

from auth.principal import Principal

# The command line's principal: it reads every organisation, as `paywarden admin ...` does.
OPERATOR = Principal.operator("cli:test")
