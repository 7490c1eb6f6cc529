"""Background job: log every organisation's audit head (its newest event's seq and hash) as one
structured line, so a copy of the heads lives outside the database (in the logs) and a truncated
chain can be caught with `paywarden audit verify --expect-head`."""

from __future__ import annotations

import logging

from sqlmodel import Session

from server.audit.service import heads, heads_document
from server.kit.db import Database
from server.kit.jsonutil import canonical

log = logging.getLogger("paywarden.audit")


class LogAuditHeads:
    name = "audit.heads"
    interval_seconds = 300.0

    def __init__(self, *, db: Database) -> None:
        self._db = db

    def _document(self, session: Session) -> dict[str, object]:
        return heads_document(heads(session))

    async def run_once(self) -> int:
        document = await self._db.reading(self._document)
        # The message carries the heads for console logs; `heads` is a field of its own in JSON
        # logs, so a logged line saved to a file is what --expect-head reads.
        found = document["heads"]
        log.info("audit heads %s", canonical(found), extra=document)
        return len(found) if isinstance(found, list) else 0
