"""One mapper from exceptions to tool errors. Unexpected exceptions are logged and masked."""

from __future__ import annotations

import logging

from mcp_types import CallToolResult

from server.kit.errors import PaywardenError
from server.mcp.content import error_result, fence
from server.payments.errors import SellerFailure

log = logging.getLogger("paywarden.tools")

_MASKED_CODES = frozenset({"internal_error"})


class InsufficientScope(PaywardenError):
    code = "insufficient_scope"
    message = "The access token does not carry the scope this tool needs."


class Unauthorized(PaywardenError):
    code = "unauthorized"
    message = "The request carries no valid access token."


def to_tool_error(exc: BaseException, *, tool: str, host: str | None = None) -> CallToolResult:
    if isinstance(exc, PaywardenError) and exc.code not in _MASKED_CODES:
        if isinstance(exc, SellerFailure) and exc.seller_reason:
            document = {**exc.as_dict(), "sellerReason": {"untrusted": True}}
            return error_result(
                document, fenced=[fence(exc.seller_reason, what="seller's reason", host=host)]
            )
        return error_result(exc.as_dict())
    log.exception("tool %s failed unexpectedly", tool, exc_info=exc)
    return error_result(PaywardenError().as_dict())
