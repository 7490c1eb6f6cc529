"""The `paywarden` command line: serve, migrate, demo, admin and audit commands."""

from server.cli.main import app, main

__all__ = ["app", "main"]
