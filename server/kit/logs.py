"""Process logging: readable lines on a console, one JSON object per line for machines.

Configured once at the entry points (`paywarden serve` workers and CLI commands), never by
library code, so tests keep their own log capture.
"""

from __future__ import annotations

import logging
import sys

from pythonjsonlogger.json import JsonFormatter

_CONSOLE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# Libraries that log every request at INFO would put sellers' URLs (and their query strings) in logs.
_QUIET = (
    "httpx",
    "httpcore",
    "web3",
    "urllib3",
    "alembic",
    "mcp.server.streamable_http",
    "mcp.server.lowlevel",
)


class _DropTerminalColours(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.__dict__.pop("color_message", None)
        return True


def configure_logging(log_format: str, *, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            )
        )
    else:
        handler.setFormatter(logging.Formatter(_CONSOLE_FORMAT))
    handler.addFilter(_DropTerminalColours())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
