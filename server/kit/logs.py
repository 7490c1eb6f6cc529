"""Process logging: readable lines on a console, one JSON object per line for machines.

Configured once at the entry points (`paywarden serve` workers and CLI commands), never by
library code, so tests keep their own log capture.

Credentials never reach a log line: the access log's request target has every credential path
segment (an enrolment token, anything `pw_*`) and credential query value (`code`, tokens,
secrets) replaced by `[redacted]`, and any `pw_*` token left in any other line is replaced too.
Every line carries the request id of the request that caused it (`-` outside one).
"""

from __future__ import annotations

import logging
import re
import sys
from urllib.parse import unquote

from pythonjsonlogger.json import JsonFormatter

from server.kit.request_ids import RequestIdFilter

_CONSOLE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(request_id)s]: %(message)s"
# Libraries that log every request at INFO would put sellers' URLs (and their query strings) in logs.
_QUIET = (
    "httpx",
    "httpcore",
    "httpx2",
    "httpcore2",
    "web3",
    "urllib3",
    "alembic",
    "mcp.server.streamable_http",
    "mcp.server.lowlevel",
)


REDACTED = "[redacted]"
# Our own credentials by their prefix (pw_en_, pw_at_, pw_rt_, pw_cs_, and any later kind).
_OUR_TOKEN = re.compile(r"pw_[a-z]{2}_[A-Za-z0-9_\-.~%]+")
# Path segments that follow these are credentials whatever they look like.
_CREDENTIAL_AFTER = frozenset({"enroll"})
_CREDENTIAL_PARAMETERS = frozenset(
    {
        "code",
        "token",
        "access_token",
        "refresh_token",
        "id_token",
        "client_secret",
        "code_verifier",
        "assertion",
        "client_assertion",
    }
)


def _is_credential(text: str) -> bool:
    return unquote(text).lower().startswith("pw_")


def redact_target(target: str) -> str:
    """A request target (path and query) fit for a log line."""
    path, question, query = target.partition("?")
    segments = path.split("/")
    kept = [
        REDACTED
        if segment and (_is_credential(segment) or (index > 0 and segments[index - 1] in _CREDENTIAL_AFTER))
        else segment
        for index, segment in enumerate(segments)
    ]
    redacted = "/".join(kept)
    if not question:
        return redacted
    pairs = []
    for pair in query.split("&"):
        name, equals, value = pair.partition("=")
        secret = unquote(name).lower() in _CREDENTIAL_PARAMETERS or _is_credential(value)
        pairs.append(f"{name}{equals}{REDACTED}" if equals and secret else pair)
    return f"{redacted}?{'&'.join(pairs)}"


class RedactCredentials(logging.Filter):
    """Rewrites uvicorn's access-log record (its third argument is the request target) and
    scrubs our token prefixes from every other line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "uvicorn.access" and isinstance(record.args, tuple) and len(record.args) >= 3:
            args = list(record.args)
            args[2] = redact_target(str(args[2]))
            record.args = tuple(args)
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # a malformed call: the formatter reports it, as without this filter
        scrubbed = _OUR_TOKEN.sub(REDACTED, message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, ()
        return True


class _DropTerminalColours(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.__dict__.pop("color_message", None)
        return True


def configure_logging(log_format: str, *, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(request_id)s %(message)s",
                rename_fields={
                    "asctime": "time",
                    "levelname": "level",
                    "name": "logger",
                    "request_id": "requestId",
                },
            )
        )
    else:
        handler.setFormatter(logging.Formatter(_CONSOLE_FORMAT))
    handler.addFilter(_DropTerminalColours())
    handler.addFilter(RequestIdFilter())
    handler.addFilter(RedactCredentials())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
