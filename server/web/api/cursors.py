"""Opaque page cursors: the position of the last row a page showed (its created time and id)."""

from __future__ import annotations

import base64
import json
from datetime import datetime

from server.web.api.problems import Problem


def encode(created_at: datetime, row_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), row_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, row_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(created, str) or not isinstance(row_id, str):
            raise ValueError(cursor)
        return datetime.fromisoformat(created), row_id
    except (ValueError, TypeError) as exc:
        raise Problem(400, "invalid_cursor", "The cursor is not one this API gave out.") from exc
