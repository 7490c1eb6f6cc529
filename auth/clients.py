"""OAuth clients: dynamic registration (RFC 7591), clients an operator creates for
client_credentials, and the lookups the authorization server makes.

Three kinds of client (see `ClientKind`):

- registered: anyone may register (rate-limited). Public clients (`none`) and confidential ones
  (`client_secret_basic`, `client_secret_post`, the RFC's default) for the authorization code
  grant, with redirect URIs that are https, http on a loopback address, or a native app's own
  scheme. Registrations that never led to a grant are purged after a day.
- metadata_document: a client whose client_id is the https URL of its metadata document; see
  auth/client_documents.py, which keeps a cached copy here.
- admin: created by an operator (`paywarden admin client create`), confidential, for the
  client_credentials grant only, bound to one agent and at most the scopes it was created with.
  It comes with its grant, so it is listed (and revocable) with the organisation's connections.

Every client secret is random, prefixed `pw_cs_`, shown once and kept as its SHA-256.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc7591.errors import InvalidClientMetadataError, InvalidRedirectURIError
from sqlmodel import Session

from auth.errors import ClientNotFound
from auth.principal import Principal
from auth.redirects import acceptable_redirect_uri
from auth.repository import ClientRepository, GrantRepository, TokenRepository
from auth.scopes import ADMIN_SCOPES, AGENT_SCOPES, OFFLINE_ACCESS, Scope, scope_text
from auth.tokens import CLIENT_SECRET_PREFIX, hash_secret, new_secret
from server.audit.service import record as audit
from server.kit.errors import InputReason, InvalidInput
from server.kit.ids import new_id
from server.models import Agent, OAuthClient, OAuthGrant
from server.vocabulary import ClientKind

REGISTERED_PREFIX = "pwc_"
AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post"})
CODE_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
MAX_REDIRECT_URIS = 10
MAX_NAME = 120
UNUSED_REGISTRATION_TTL = timedelta(days=1)
STALE_DOCUMENT_TTL = timedelta(days=7)
REQUESTABLE_SCOPES = frozenset({*(str(scope) for scope in AGENT_SCOPES), OFFLINE_ACCESS})


@dataclass(frozen=True)
class NewClient:
    row: OAuthClient
    secret: str | None  # shown once


def is_document_url(client_id: str) -> bool:
    """Whether a client_id names a client metadata document (it is a URL)."""
    return "://" in client_id


def client_name(row: OAuthClient) -> str:
    """What pages call a client: its name, or its client_id's host for a metadata document."""
    if row.name:
        return row.name
    if row.kind == ClientKind.METADATA_DOCUMENT:
        return urlsplit(row.client_id).hostname or row.client_id
    return "an application with no name"


def check_secret(row: OAuthClient, secret: str) -> bool:
    return row.secret_hash is not None and hmac.compare_digest(row.secret_hash, hash_secret(secret))


def clean_name(value: object) -> str | None:
    """A client's name as people will see it: printable, single spaces, at most 120 characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidClientMetadataError("client_name must be a string.")
    name = " ".join("".join(ch for ch in value if ch.isprintable()).split())
    if len(name) > MAX_NAME:
        raise InvalidClientMetadataError(f"client_name must be at most {MAX_NAME} characters.")
    return name or None


def _string_list(metadata: dict[str, Any], field: str, default: list[str]) -> list[str]:
    value = metadata.get(field, default)
    if value is None:
        return default
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidClientMetadataError(f"{field} must be a list of strings.")
    return list(dict.fromkeys(value))


def redirect_uris_of(metadata: dict[str, Any]) -> list[str]:
    uris = metadata.get("redirect_uris")
    if not isinstance(uris, list) or not uris or len(uris) > MAX_REDIRECT_URIS:
        raise InvalidRedirectURIError(f"redirect_uris must list 1 to {MAX_REDIRECT_URIS} URIs.")
    for uri in uris:
        if not acceptable_redirect_uri(uri):
            raise InvalidRedirectURIError(
                "Each redirect URI must be https, http on 127.0.0.1, [::1] or localhost, or an "
                "application's own scheme in reverse-domain form (com.example.app:/callback), without "
                "a fragment or a wildcard."
            )
    return list(dict.fromkeys(uris))


def code_grant_types(metadata: dict[str, Any]) -> list[str]:
    grant_types = _string_list(metadata, "grant_types", ["authorization_code", "refresh_token"])
    if "client_credentials" in grant_types:
        raise InvalidClientMetadataError(
            "client_credentials clients are created by an operator (paywarden admin client create)."
        )
    if not set(grant_types) <= CODE_GRANT_TYPES or "authorization_code" not in grant_types:
        raise InvalidClientMetadataError(
            "grant_types must be authorization_code, and refresh_token if wanted."
        )
    response_types = _string_list(metadata, "response_types", ["code"])
    if response_types != ["code"]:
        raise InvalidClientMetadataError("response_types must be code.")
    return grant_types


def _scope(metadata: dict[str, Any]) -> str | None:
    value = metadata.get("scope")
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidClientMetadataError("scope must be a string.")
    names = set(value.split())
    if names & {str(scope) for scope in ADMIN_SCOPES}:
        raise InvalidClientMetadataError("The admin scope is never granted to an application.")
    if not names <= REQUESTABLE_SCOPES:
        raise InvalidClientMetadataError(f"scope may hold only: {' '.join(sorted(REQUESTABLE_SCOPES))}.")
    return scope_text(names) or None


def _https_url(metadata: dict[str, Any], field: str) -> str | None:
    value = metadata.get(field)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 512 or urlsplit(value).scheme != "https":
        raise InvalidClientMetadataError(f"{field} must be an https URL of at most 512 characters.")
    return value


def register_client(session: Session, *, metadata: object, now: datetime) -> NewClient:
    """Dynamic client registration (RFC 7591 section 3)."""
    if not isinstance(metadata, dict):
        raise InvalidClientMetadataError("The registration must be a JSON object.")
    redirect_uris = redirect_uris_of(metadata)
    grant_types = code_grant_types(metadata)
    method = metadata.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise InvalidClientMetadataError(
            f"token_endpoint_auth_method must be one of: {', '.join(AUTH_METHODS)}."
        )
    application_type = metadata.get("application_type")
    if application_type not in (None, "web", "native"):
        raise InvalidClientMetadataError("application_type must be web or native.")
    secret = new_secret(CLIENT_SECRET_PREFIX) if method in SECRET_METHODS else None
    row = OAuthClient(
        id=new_id("client"),
        client_id=REGISTERED_PREFIX + secrets.token_urlsafe(24),
        kind=ClientKind.REGISTERED,
        name=clean_name(metadata.get("client_name")),
        redirect_uris=redirect_uris,
        grant_types=grant_types,
        token_endpoint_auth_method=str(method),
        application_type=application_type,
        scope=_scope(metadata),
        secret_hash=hash_secret(secret) if secret else None,
        client_uri=_https_url(metadata, "client_uri"),
        created_by="registration",
        created_at=now,
    )
    ClientRepository(session).add(row)
    return NewClient(row, secret)


def find_client(session: Session, client_id: str) -> OAuthClient | None:
    """A usable client by its public client_id (a disabled admin client is not usable)."""
    if not client_id or len(client_id) > 512:
        return None
    row = ClientRepository(session).by_client_id(client_id)
    return None if row is None or row.disabled_at is not None else row


def create_admin_client(
    session: Session,
    *,
    agent: Agent,
    name: str,
    scopes: frozenset[Scope],
    resource: str,
    actor: str,
    now: datetime,
) -> NewClient:
    """A confidential client_credentials client that acts for `agent` with at most `scopes`."""
    if not scopes or not scopes <= AGENT_SCOPES:
        raise InvalidInput(
            InputReason.ADMIN_SCOPE_NOT_GRANTABLE if scopes & ADMIN_SCOPES else InputReason.INVALID_SCOPE
        )
    label = " ".join(name.split())
    if not 1 <= len(label) <= MAX_NAME or not label.isprintable():
        raise InvalidInput(InputReason.INVALID_NAME)
    secret = new_secret(CLIENT_SECRET_PREFIX)
    row = OAuthClient(
        id=new_id("client"),
        client_id=REGISTERED_PREFIX + secrets.token_urlsafe(24),
        kind=ClientKind.ADMIN,
        name=label,
        redirect_uris=[],
        grant_types=["client_credentials"],
        token_endpoint_auth_method="client_secret_basic",  # noqa: S106 - a method name
        scope=scope_text(scopes),
        secret_hash=hash_secret(secret),
        org_id=agent.org_id,
        agent_id=agent.id,
        created_by=actor,
        created_at=now,
    )
    ClientRepository(session).add(row)
    grant = OAuthGrant(
        id=new_id("grant"),
        org_id=agent.org_id,
        agent_id=agent.id,
        client_id=row.id,
        member_id=None,
        scopes=scope_text(scopes),
        resource=resource,
        created_by=actor,
        created_at=now,
        updated_at=now,
    )
    GrantRepository(session).add(grant)
    audit(
        session,
        org_id=agent.org_id,
        type="oauth.client_created",
        actor=actor,
        agent_id=agent.id,
        subject_id=row.id,
        data={"clientId": row.client_id, "name": label, "scopes": sorted(scopes), "grantId": grant.id},
        now=now,
    )
    return NewClient(row, secret)


def admin_client_grant(session: Session, row: OAuthClient) -> OAuthGrant | None:
    """The live grant of an admin client (None once it was revoked)."""
    if row.agent_id is None or row.org_id is None:
        return None
    return GrantRepository(session).live_for(org_id=row.org_id, client_row_id=row.id, agent_id=row.agent_id)


def revoke_admin_client(
    session: Session, principal: Principal, *, client_id: str, now: datetime
) -> OAuthClient:
    """Disable an admin client and revoke its grant and tokens at once."""
    row = ClientRepository(session).by_client_id(client_id)
    if row is None or row.kind != ClientKind.ADMIN or row.org_id is None:
        raise ClientNotFound()
    if not principal.unrestricted and principal.org_id != row.org_id:
        raise ClientNotFound()
    if row.disabled_at is None:
        row.disabled_at = now
        ClientRepository(session).add(row)
        grant = admin_client_grant(session, row)
        revoked = 0
        if grant is not None:
            grant.revoked_at = now
            grant.revoked_by = principal.actor
            GrantRepository(session).add(grant)
            revoked = TokenRepository(session).revoke_of_grant(
                org_id=grant.org_id, grant_id=grant.id, now=now
            )
        audit(
            session,
            org_id=row.org_id,
            type="oauth.client_revoked",
            actor=principal.actor,
            agent_id=row.agent_id,
            subject_id=row.id,
            data={"clientId": row.client_id, "tokensRevoked": revoked},
            now=now,
        )
    return row


def purge_unused(session: Session, *, now: datetime) -> int:
    """Forget registrations that never led to a grant within a day, and cached metadata documents
    nobody used, stale for a week."""
    return ClientRepository(session).purge_unused(
        registered_before=now - UNUSED_REGISTRATION_TTL, stale_before=now - STALE_DOCUMENT_TTL
    )
