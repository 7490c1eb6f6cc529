"""Client ID metadata documents: a client whose client_id is an https URL publishes its metadata
there, and Paywarden fetches it instead of asking the client to register.

The document is fetched through the seller client (server/sellers/client.py), the one client that
judges every address it connects to: https only, no private, loopback or link-local address (unless
private hosts are allowed for development), one deadline, a size cap, no redirect followed. The
document must name its own URL as `client_id` exactly; its `redirect_uris` are the only ones the
client may use; it may only be a public client (`none`).

HTTP caching is honoured: the copy is kept until `max-age` (or `Expires`) says it is stale, at most
a day; `no-store` or `no-cache` means every authorization fetches it again; an `ETag` is sent back
as `If-None-Match`, and a 304 keeps the copy. The copy lives in the database (oauth_clients), so
every server process shares it.

A document that could not be fetched or used is remembered as failed (in the database too) for
`failure_ttl`: until then the authorization endpoint answers with the same reason without fetching
again, so nobody can use it to send GETs to a host at the rate they like. A document that works
again is used as soon as that time is over.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from authlib.oauth2.rfc6749 import OAuth2Error
from sqlmodel import Session

from auth.clients import clean_name, code_grant_types, is_document_url, redirect_uris_of
from auth.errors import ClientDocumentUnusable, DocumentReason
from auth.repository import ClientRepository, DocumentFailureRepository
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.errors import InvalidInput, PaywardenError
from server.kit.ids import new_id
from server.models import ClientDocumentFailure, OAuthClient
from server.sellers.client import SellerClient, SellerRequest
from server.sellers.errors import PrivateAddressBlocked, SellerTimeout
from server.vocabulary import ClientKind

MAX_DOCUMENT_BYTES = 16 * 1024
MAX_URL = 500
FETCH_TIMEOUT_S = 5.0
DEFAULT_FRESHNESS = timedelta(hours=1)
MAX_FRESHNESS = timedelta(days=1)
_MAX_AGE = re.compile(r"(?:^|,)\s*(s-maxage|max-age)\s*=\s*\"?(\d+)\"?", re.IGNORECASE)


def check_document_url(client_id: str) -> None:
    """A document URL: https, a host, a path other than `/`, no fragment, credentials or dot
    segments, at most 500 characters."""
    try:
        parts = urlsplit(client_id)
        _ = parts.port
    except ValueError as exc:
        raise ClientDocumentUnusable(DocumentReason.INVALID_URL) from exc
    segments = parts.path.split("/")
    if (
        len(client_id) > MAX_URL
        or parts.scheme != "https"
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or "#" in client_id
        or parts.path in ("", "/")
        or "." in segments
        or ".." in segments
    ):
        raise ClientDocumentUnusable(DocumentReason.INVALID_URL)


@dataclass(frozen=True)
class ClientDocument:
    """What Paywarden keeps of a valid document."""

    client_id: str
    name: str | None
    redirect_uris: list[str]
    grant_types: list[str]
    client_uri: str | None


def parse_document(url: str, body: bytes) -> ClientDocument:
    try:
        document: Any = json.loads(body)
    except ValueError as exc:
        raise ClientDocumentUnusable(DocumentReason.NOT_JSON) from exc
    if not isinstance(document, dict):
        raise ClientDocumentUnusable(DocumentReason.NOT_JSON)
    if document.get("client_id") != url:
        raise ClientDocumentUnusable(DocumentReason.CLIENT_ID_MISMATCH)
    if document.get("token_endpoint_auth_method", "none") != "none":
        raise ClientDocumentUnusable(DocumentReason.UNSUPPORTED_AUTH_METHOD)
    try:
        redirect_uris = redirect_uris_of(document)
    except OAuth2Error as exc:
        raise ClientDocumentUnusable(DocumentReason.BAD_REDIRECT_URIS) from exc
    try:
        grant_types = code_grant_types(document)
    except OAuth2Error as exc:
        raise ClientDocumentUnusable(DocumentReason.UNSUPPORTED_GRANT_TYPES) from exc
    try:
        name = clean_name(document.get("client_name"))
    except OAuth2Error:
        name = None
    client_uri = document.get("client_uri")
    if not (isinstance(client_uri, str) and client_uri.startswith("https://") and len(client_uri) <= 512):
        client_uri = None
    return ClientDocument(url, name, redirect_uris, grant_types, client_uri)


def freshness(headers: httpx.Headers, now: datetime) -> timedelta:
    """How long a fetched copy may be used, from the answer's caching headers."""
    control = headers.get("cache-control", "")
    directives = {part.strip().split("=", 1)[0].lower() for part in control.split(",") if part.strip()}
    if "no-store" in directives or "no-cache" in directives:
        return timedelta(0)
    ages = {name.lower(): int(value) for name, value in _MAX_AGE.findall(control)}
    if ages:
        seconds = ages.get("s-maxage", ages.get("max-age", 0))
        return min(timedelta(seconds=seconds), MAX_FRESHNESS)
    expires = headers.get("expires")
    if expires:
        try:
            until = parsedate_to_datetime(expires)
        except (TypeError, ValueError):
            return timedelta(0)  # an invalid Expires means already expired (RFC 9111 section 5.3)
        if until.tzinfo is None:
            return timedelta(0)
        return min(max(until - now, timedelta(0)), MAX_FRESHNESS)
    return DEFAULT_FRESHNESS


def store_document(
    session: Session,
    *,
    document: ClientDocument | None,
    url: str,
    etag: str | None,
    stale_at: datetime,
    now: datetime,
) -> None:
    """Keep a fetched copy (or, with `document` None, a 304's news that the copy still holds)."""
    clients = ClientRepository(session)
    row = clients.by_client_id(url)
    if row is None:
        if document is None:
            return
        row = OAuthClient(
            id=new_id("client"),
            client_id=url,
            kind=ClientKind.METADATA_DOCUMENT,
            token_endpoint_auth_method="none",  # noqa: S106 - a method name, not a secret
            created_by="metadata_document",
            created_at=now,
        )
    elif row.kind != ClientKind.METADATA_DOCUMENT:
        return
    if document is not None:
        row.name = document.name
        row.redirect_uris = document.redirect_uris
        row.grant_types = document.grant_types
        row.client_uri = document.client_uri
        row.document_etag = etag[:200] if etag else None
    row.fetched_at = now
    row.stale_at = stale_at
    if not clients.add_unique(row):
        # Another process stored the same document a moment ago: its copy is as good as ours.
        return


class ClientDocuments:
    """Fetches and caches client ID metadata documents for the authorization endpoint."""

    def __init__(
        self, *, db: Database, http: SellerClient, clock: Clock, failure_ttl: timedelta = timedelta(0)
    ) -> None:
        self._db = db
        self._http = http
        self._clock = clock
        self._failure_ttl = failure_ttl
        self.fetches = 0  # how many documents this process fetched (tests count them)

    async def ensure_current(self, client_id: str) -> None:
        """Make sure a fresh copy of the document behind `client_id` is stored, fetching it if
        the stored copy is stale or missing. Raises ClientDocumentUnusable saying why not."""
        if not is_document_url(client_id):
            return
        check_document_url(client_id)
        now = self._clock.now()
        url_hash = hashlib.sha256(client_id.encode()).hexdigest()
        cached, failure = await self._db.reading(self._cached, client_id, url_hash, now)
        if cached is not None and cached.stale_at is not None and cached.stale_at > now:
            return
        if failure is not None:
            raise ClientDocumentUnusable(DocumentReason(failure.reason))
        try:
            document, etag, stale_at, fetched_at = await self._fetch_document(client_id, cached)
        except ClientDocumentUnusable as unusable:
            if self._failure_ttl > timedelta(0):
                await self._db.run(self._remember, client_id, url_hash, unusable.reason)
            raise
        await self._db.writing(self._store, document, client_id, etag, stale_at, fetched_at)

    async def _fetch_document(
        self, client_id: str, cached: OAuthClient | None
    ) -> tuple[ClientDocument | None, str | None, datetime, datetime]:
        """Fetch and parse: the document (None for a 304), its ETag, when it goes stale, and when
        it was fetched."""
        etag = cached.document_etag if cached is not None else None
        status, headers, body = await self._fetch(client_id, etag)
        now = self._clock.now()
        stale_at = now + freshness(headers, now)
        if status == 304 and cached is not None:
            document = None
        elif status == 200:
            document = parse_document(client_id, body)
        else:
            raise ClientDocumentUnusable(DocumentReason.BAD_STATUS)
        return document, headers.get("etag"), stale_at, now

    def _cached(
        self, session: Session, client_id: str, url_hash: str, now: datetime
    ) -> tuple[OAuthClient | None, ClientDocumentFailure | None]:
        return (
            ClientRepository(session).by_client_id(client_id),
            DocumentFailureRepository(session).current(url_hash, now),
        )

    def _remember(self, client_id: str, url_hash: str, reason: DocumentReason) -> None:
        now = self._clock.now()
        with self._db.write() as session:
            DocumentFailureRepository(session).remember(
                ClientDocumentFailure(
                    url_hash=url_hash,
                    url=client_id,
                    reason=str(reason),
                    failed_at=now,
                    retry_at=now + self._failure_ttl,
                )
            )

    def _store(
        self,
        session: Session,
        document: ClientDocument | None,
        url: str,
        etag: str | None,
        stale_at: datetime,
        now: datetime,
    ) -> None:
        store_document(session, document=document, url=url, etag=etag, stale_at=stale_at, now=now)

    async def _fetch(self, url: str, etag: str | None) -> tuple[int, httpx.Headers, bytes]:
        headers = {"Accept": "application/json"}
        if etag:
            headers["If-None-Match"] = etag
        self.fetches += 1
        try:
            response = await self._http.send(
                SellerRequest("GET", url, headers=headers), deadline=anyio.current_time() + FETCH_TIMEOUT_S
            )
        except PrivateAddressBlocked as exc:
            raise ClientDocumentUnusable(DocumentReason.PRIVATE_ADDRESS) from exc
        except SellerTimeout as exc:
            raise ClientDocumentUnusable(DocumentReason.TIMEOUT) from exc
        except InvalidInput as exc:
            raise ClientDocumentUnusable(DocumentReason.INVALID_URL) from exc
        except PaywardenError as exc:
            raise ClientDocumentUnusable(DocumentReason.UNREACHABLE) from exc
        if response.body_error is not None:
            raise ClientDocumentUnusable(DocumentReason.UNREACHABLE)
        if response.truncated or len(response.body) > MAX_DOCUMENT_BYTES:
            raise ClientDocumentUnusable(DocumentReason.TOO_LARGE)
        return response.status, response.headers, response.body
