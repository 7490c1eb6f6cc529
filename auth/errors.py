"""Identity's errors: one class per stable code, each with a fixed sentence a person understands.

The pages show `message` as it is, so every message is written for the member reading it.
"""

from __future__ import annotations

from enum import StrEnum

from server.kit.errors import PaywardenError


class RateLimited(PaywardenError):
    code = "rate_limited"
    message = "Too many requests came from here in a short time. Wait a minute and try again."


class CsrfFailed(PaywardenError):
    code = "csrf_failed"
    message = (
        "This form has expired or did not come from a Paywarden page. Go back, reload the page and try again."
    )


class SignInRequired(PaywardenError):
    code = "sign_in_required"
    message = "Please sign in with your passkey first."


class ChallengeExpired(PaywardenError):
    code = "challenge_expired"
    message = "This passkey request took too long or was already used. Please try again."


class PasskeyNotRecognised(PaywardenError):
    code = "passkey_not_recognised"
    message = (
        "This passkey is not registered with Paywarden. Use the passkey you created for Paywarden, "
        "or ask an owner of your organisation for a new enrolment link."
    )


class PasskeyCheckFailed(PaywardenError):
    code = "passkey_check_failed"
    message = "Your passkey's answer could not be verified, so nothing was changed. Please try again."


class EnrollmentLinkInvalid(PaywardenError):
    code = "enrollment_link_invalid"
    message = (
        "This enrolment link has expired or has already been used. "
        "Ask an owner of your organisation for a new one."
    )


class MemberDisabled(PaywardenError):
    code = "member_disabled"
    message = "Your membership has been disabled. Ask an owner of your organisation."


class PasskeyNotFound(PaywardenError):
    code = "passkey_not_found"
    message = "That passkey does not exist, or it is not one of yours."


class LastPasskey(PaywardenError):
    code = "last_passkey"
    message = "This is your only passkey, so it cannot be removed. Add another passkey first."


class StepUpRequired(PaywardenError):
    code = "step_up_required"
    message = (
        "Adding a passkey needs a fresh check with one of your passkeys, and that check was "
        "missing, already used or too old. Start again from your passkeys page."
    )


class InvalidPasskeyName(PaywardenError):
    code = "invalid_passkey_name"
    message = "Give the passkey a name of 1 to 60 characters."


class AgentNotDelegable(PaywardenError):
    code = "agent_not_delegable"
    message = "You cannot give an application access to that agent."


class ScopeNotGrantable(PaywardenError):
    code = "scope_not_grantable"
    message = "You cannot give an application one of the permissions that was chosen."


class NoScopeChosen(PaywardenError):
    code = "no_scope_chosen"
    message = "Choose at least one permission to give the application, or choose Deny."


class ConnectionNotFound(PaywardenError):
    code = "connection_not_found"
    message = "That connection does not exist or has already been revoked."


class RevokeForbidden(PaywardenError):
    code = "forbidden"
    message = (
        "Only an owner or admin, the member who connected the application, or the agent's person "
        "can revoke this connection."
    )


class ClientNotFound(PaywardenError):
    code = "client_not_found"
    message = "No OAuth client with that id."


class DocumentReason(StrEnum):
    """Why a client ID metadata document could not be used, each with one fixed sentence."""

    INVALID_URL = "invalid_url"
    PRIVATE_ADDRESS = "private_address"
    UNREACHABLE = "unreachable"
    TIMEOUT = "timeout"
    BAD_STATUS = "bad_status"
    TOO_LARGE = "too_large"
    NOT_JSON = "not_json"
    CLIENT_ID_MISMATCH = "client_id_mismatch"
    BAD_REDIRECT_URIS = "bad_redirect_uris"
    UNSUPPORTED_AUTH_METHOD = "unsupported_auth_method"
    UNSUPPORTED_GRANT_TYPES = "unsupported_grant_types"

    @property
    def sentence(self) -> str:
        return _DOCUMENT_SENTENCES[self]


_DOCUMENT_SENTENCES = {
    DocumentReason.INVALID_URL: (
        "Its client ID must be an https URL with a path, without a fragment, user name or password."
    ),
    DocumentReason.PRIVATE_ADDRESS: (
        "Its address is on a private or local network, which Paywarden never fetches."
    ),
    DocumentReason.UNREACHABLE: "Its address could not be reached.",
    DocumentReason.TIMEOUT: "Its address did not answer in time.",
    DocumentReason.BAD_STATUS: "Its address did not answer with the document (HTTP 200).",
    DocumentReason.TOO_LARGE: "The document is larger than 16 KB.",
    DocumentReason.NOT_JSON: "The document is not a JSON object.",
    DocumentReason.CLIENT_ID_MISMATCH: "The document names a client_id other than its own URL.",
    DocumentReason.BAD_REDIRECT_URIS: (
        "The document's redirect_uris are missing or not acceptable (https, or http on a loopback "
        "address, or an application's own scheme in reverse-domain form such as "
        "com.example.app:/callback; never with a fragment or a wildcard)."
    ),
    DocumentReason.UNSUPPORTED_AUTH_METHOD: (
        "The document asks for a client authentication method other than none."
    ),
    DocumentReason.UNSUPPORTED_GRANT_TYPES: (
        "The document asks for grant or response types other than authorization_code, refresh_token and code."
    ),
}


class ClientDocumentUnusable(PaywardenError):
    code = "invalid_client"
    message = "Paywarden could not use this application's client metadata document."

    def __init__(self, reason: DocumentReason) -> None:
        self.reason = reason
        super().__init__(reason=str(reason))

    def describe(self) -> str:
        return f"{self.message} {self.reason.sentence}"
