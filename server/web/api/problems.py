"""RFC 9457 problem details: every error of the admin API is one, with a stable `type` per code."""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse

from server.kit.errors import PaywardenError

TYPE_PREFIX = "urn:paywarden:problem:"
MEDIA_TYPE = "application/problem+json"


class Problem(Exception):
    """An answer that is not the resource asked for: a status, a stable code and a sentence."""

    def __init__(
        self, status: int, code: str, detail: str, *, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(f"{code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.headers = dict(headers or {})

    @classmethod
    def of(cls, error: PaywardenError, status: int) -> Problem:
        return cls(status, error.code, error.describe())

    def response(self) -> JSONResponse:
        body = {
            "type": f"{TYPE_PREFIX}{self.code}",
            "title": self.code.replace("_", " ").capitalize(),
            "status": self.status,
            "detail": self.detail,
            "code": self.code,
        }
        return JSONResponse(body, status_code=self.status, headers=self.headers, media_type=MEDIA_TYPE)
