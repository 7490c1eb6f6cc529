"""The discovery documents: RFC 9728 protected resource metadata for /mcp and RFC 8414
authorization server metadata, written out in full rather than generated."""

from __future__ import annotations

from auth.scopes import AGENT_SCOPES

AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"]


def protected_resource(*, resource: str, issuer: str) -> dict[str, object]:
    """RFC 9728. `offline_access` is not a scope of the resource, so it is not listed."""
    return {
        "resource": resource,
        "authorization_servers": [issuer],
        "scopes_supported": sorted(AGENT_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "Paywarden",
    }


def authorization_server(*, issuer: str) -> dict[str, object]:
    """RFC 8414, for an issuer without a path (its document is at the well-known URL's root)."""
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "registration_endpoint": f"{issuer}/oauth/register",
        "revocation_endpoint": f"{issuer}/oauth/revoke",
        "introspection_endpoint": f"{issuer}/oauth/introspect",
        "scopes_supported": sorted(AGENT_SCOPES),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported": AUTH_METHODS,
        "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
        "introspection_endpoint_auth_methods_supported": AUTH_METHODS,
        "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": True,
        "authorization_response_iss_parameter_supported": True,
    }
