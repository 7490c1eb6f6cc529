"""The one error type domains raise: a stable code, a fixed message, and validated extra fields.

Each domain declares its errors at the top of its service module as subclasses or factories of
`PaywardenError`. One mapper (server/mcp/errors.py) turns them into tool errors; the CLI prints
them as one line. Messages are written by us, never copied from a seller or a library.
"""

from __future__ import annotations

from typing import Any


class PaywardenError(Exception):
    code: str = "internal_error"
    message: str = "Unexpected error in the server."

    def __init__(self, code: str | None = None, message: str | None = None, **extra: Any) -> None:
        if code is not None:
            self.code = code
        if message is not None:
            self.message = message
        self.extra: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
        super().__init__(f"{self.code}: {self.message}")

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.extra}


class InvalidInput(PaywardenError):
    code = "invalid_input"
    message = "The input is invalid. See reason."

    def __init__(self, reason: str, message: str | None = None, **extra: Any) -> None:
        super().__init__(message=message, reason=reason, **extra)
        self.reason = reason


class NotFound(PaywardenError):
    code = "not_found"
    message = "The resource was not found."
