"""Members' passkeys (WebAuthn, with the `webauthn` package): enrolment from a one-time link,
sign-in, and adding, renaming and removing passkeys.

Sign-in is passkey-only and usernameless: the page asks for any passkey of this site (a
discoverable credential) and the credential it answers with names the member. Every ceremony
requires user verification (a PIN, a fingerprint, a face), not just presence. Challenges are rows
(any server process can check an answer) used once, within `CHALLENGE_TTL`, for one purpose.

Enrolment links carry a random token of which only the SHA-256 is kept on the member; the first
passkey registered through a link uses it up.

`webauthn` (with the X.509 and CBOR parsers it brings) is loaded by the ceremonies that use it: a
server process starts without it, and its first passkey ceremony pays for it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import Session

from auth.errors import (
    ChallengeExpired,
    EnrollmentLinkInvalid,
    InvalidPasskeyName,
    LastPasskey,
    MemberDisabled,
    PasskeyCheckFailed,
    PasskeyNotFound,
    PasskeyNotRecognised,
)
from auth.principal import Principal
from auth.repository import (
    ChallengeRepository,
    MemberAccountRepository,
    PasskeyRepository,
    SessionRepository,
)
from server.audit.service import record as audit
from server.kit.ids import new_id
from server.models import Member, MemberPasskey, WebAuthnChallenge
from server.vocabulary import ChallengePurpose

ENROLL_PREFIX = "pw_en_"
ENROLL_TTL = timedelta(hours=24)  # PAYWARDEN_ENROLL_TTL; a link is a credential in an email
CHALLENGE_TTL = timedelta(minutes=5)
# A decision on a payment is confirmed at once or asked again: its nonce lives two minutes.
CONFIRMATION_TTL = timedelta(minutes=2)
RP_NAME = "Paywarden"
MAX_NAME = 60


@functools.cache
def _known_transports() -> frozenset[str]:
    from webauthn.helpers.structs import AuthenticatorTransport

    return frozenset(item.value for item in AuthenticatorTransport)


def _ceremony_errors() -> tuple[type[Exception], ...]:
    """Whatever goes wrong inside a ceremony's answer is the member's passkey failing, not the
    server."""
    from webauthn.helpers.exceptions import (
        InvalidAuthenticationResponse,
        InvalidCBORData,
        InvalidJSONStructure,
        InvalidRegistrationResponse,
    )

    return (
        InvalidRegistrationResponse,
        InvalidAuthenticationResponse,
        InvalidJSONStructure,
        InvalidCBORData,
        KeyError,
        TypeError,
        ValueError,
    )


@dataclass(frozen=True)
class RelyingParty:
    """Who the passkeys are for: the pages' host name (`rp_id`) and exact origin."""

    rp_id: str
    origin: str


@dataclass(frozen=True)
class Enrollment:
    token: str  # shown once, in the link
    token_hash: str
    expires_at: datetime


@dataclass(frozen=True)
class Ceremony:
    """A challenge handed to a page: its id (posted back with the answer) and the options as JSON."""

    challenge_id: str
    options_json: str


def hash_enroll_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_enrollment(now: datetime, *, ttl: timedelta = ENROLL_TTL) -> Enrollment:
    token = ENROLL_PREFIX + secrets.token_urlsafe(32)
    return Enrollment(token, hash_enroll_token(token), now + ttl)


def reissue_enrollment(
    session: Session, *, member: Member, actor: str, now: datetime, ttl: timedelta = ENROLL_TTL
) -> Enrollment:
    """A new one-time link for `member`, live for `ttl` (the previous one stops working)."""
    enrollment = new_enrollment(now, ttl=ttl)
    member.enroll_token_hash = enrollment.token_hash
    member.enroll_expires_at = enrollment.expires_at
    MemberAccountRepository(session).add(member)
    audit(
        session,
        org_id=member.org_id,
        type="member.enrollment_issued",
        actor=actor,
        subject_id=member.id,
        data={"expiresAt": enrollment.expires_at.isoformat()},
        now=now,
    )
    return enrollment


def member_for_enrollment(session: Session, token: str, *, now: datetime) -> Member:
    """The member a live enrolment link is for."""
    if not token.startswith(ENROLL_PREFIX) or len(token) > 100:
        raise EnrollmentLinkInvalid()
    member = MemberAccountRepository(session).by_enroll_hash(hash_enroll_token(token))
    if member is None or member.enroll_expires_at is None or member.enroll_expires_at <= now:
        raise EnrollmentLinkInvalid()
    if member.disabled_at is not None:
        raise MemberDisabled()
    return member


def has_passkey(session: Session, member: Member) -> bool:
    return PasskeyRepository(session).count_of_member(org_id=member.org_id, member_id=member.id) > 0


def _new_challenge(
    session: Session, *, purpose: ChallengePurpose, member: Member | None, challenge: bytes, now: datetime
) -> str:
    row = WebAuthnChallenge(
        id=new_id("challenge"),
        purpose=purpose,
        challenge=challenge,
        member_id=member.id if member else None,
        created_at=now,
        expires_at=now + CHALLENGE_TTL,
    )
    ChallengeRepository(session).add(row)
    return row.id


def claim_challenge(
    session: Session, challenge_id: object, *, purpose: ChallengePurpose, now: datetime
) -> WebAuthnChallenge:
    """Use up a challenge before its answer is checked. Callers commit this on its own, so a
    challenge is used once even when the answer then fails."""
    if not isinstance(challenge_id, str) or len(challenge_id) > 40:
        raise ChallengeExpired()
    row = ChallengeRepository(session).claim(challenge_id, purpose=purpose, now=now)
    if row is None:
        raise ChallengeExpired()
    return row


def registration_options(
    session: Session, *, rp: RelyingParty, member: Member, purpose: ChallengePurpose, now: datetime
) -> Ceremony:
    """Options for creating a passkey for `member` (a discoverable credential, user verified)."""
    from webauthn import generate_registration_options, options_to_json
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import (
        AuthenticatorSelectionCriteria,
        PublicKeyCredentialDescriptor,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    existing = PasskeyRepository(session).of_member(_principal(member), member.id)
    options = generate_registration_options(
        rp_id=rp.rp_id,
        rp_name=RP_NAME,
        user_id=member.id.encode(),
        user_name=member.email,
        user_display_name=member.email,
        timeout=int(CHALLENGE_TTL.total_seconds() * 1000),
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=[
            PublicKeyCredentialDescriptor(id=base64url_to_bytes(row.credential_id)) for row in existing
        ],
    )
    challenge_id = _new_challenge(
        session, purpose=purpose, member=member, challenge=options.challenge, now=now
    )
    return Ceremony(challenge_id, options_to_json(options))


def _principal(member: Member) -> Principal:
    return Principal.for_member(org_id=member.org_id, member_id=member.id)


def passkey_name(text: object, *, now: datetime) -> str:
    """The name a member gave a passkey, or one from the date when they gave none."""
    if text is None or (isinstance(text, str) and not text.strip()):
        return f"Passkey added {now:%Y-%m-%d}"
    if not isinstance(text, str):
        raise InvalidPasskeyName()
    name = " ".join(text.split())
    if not 1 <= len(name) <= MAX_NAME or not name.isprintable():
        raise InvalidPasskeyName()
    return name


def register_passkey(
    session: Session,
    *,
    rp: RelyingParty,
    member: Member,
    challenge: WebAuthnChallenge,
    credential: object,
    name: object,
    now: datetime,
) -> MemberPasskey:
    """Verify the browser's answer to a claimed registration challenge and keep the new passkey.
    An enrolment uses up the member's enrolment link."""
    from webauthn import verify_registration_response
    from webauthn.helpers import bytes_to_base64url

    label = passkey_name(name, now=now)
    purpose = challenge.purpose
    if challenge.member_id != member.id or purpose not in (
        ChallengePurpose.ENROLL,
        ChallengePurpose.ADD_PASSKEY,
    ):
        raise ChallengeExpired()
    try:
        verified = verify_registration_response(
            credential=_credential(credential),
            expected_challenge=challenge.challenge,
            expected_rp_id=rp.rp_id,
            expected_origin=rp.origin,
            require_user_verification=True,
        )
    except _ceremony_errors() as exc:
        raise PasskeyCheckFailed() from exc
    passkeys = PasskeyRepository(session)
    credential_id = bytes_to_base64url(verified.credential_id)
    if passkeys.by_credential_id(credential_id) is not None:
        raise PasskeyCheckFailed()
    row = MemberPasskey(
        id=new_id("passkey"),
        org_id=member.org_id,
        member_id=member.id,
        credential_id=credential_id,
        public_key=verified.credential_public_key,
        sign_count=verified.sign_count,
        name=label,
        transports=_transports(credential),
        created_at=now,
    )
    passkeys.add(row)
    if purpose is ChallengePurpose.ENROLL:
        member.enroll_token_hash = None
        member.enroll_expires_at = None
        MemberAccountRepository(session).add(member)
    audit(
        session,
        org_id=member.org_id,
        type="passkey.added",
        actor=f"member:{member.id}",
        subject_id=row.id,
        data={
            "passkeyId": row.id,
            "memberId": member.id,
            "name": label,
            "enrolment": purpose is ChallengePurpose.ENROLL,
        },
        now=now,
    )
    return row


def authentication_options(session: Session, *, rp: RelyingParty, now: datetime) -> Ceremony:
    """Options for a usernameless sign-in: any passkey of this site may answer."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers.structs import UserVerificationRequirement

    options = generate_authentication_options(
        rp_id=rp.rp_id,
        timeout=int(CHALLENGE_TTL.total_seconds() * 1000),
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    challenge_id = _new_challenge(
        session, purpose=ChallengePurpose.SIGN_IN, member=None, challenge=options.challenge, now=now
    )
    return Ceremony(challenge_id, options_to_json(options))


def authenticate(
    session: Session, *, rp: RelyingParty, challenge: WebAuthnChallenge, credential: object, now: datetime
) -> tuple[Member, MemberPasskey]:
    """The member whose passkey answered the (claimed) sign-in challenge."""
    from webauthn.helpers import base64url_to_bytes

    if challenge.purpose is not ChallengePurpose.SIGN_IN:
        raise ChallengeExpired()
    answer = _credential(credential)
    passkeys = PasskeyRepository(session)
    passkey = _answering_passkey(passkeys, answer)
    if passkey is None:
        raise PasskeyNotRecognised()
    member = MemberAccountRepository(session).by_id(passkey.member_id)
    if member is None:
        raise PasskeyNotRecognised()
    if member.disabled_at is not None:
        raise MemberDisabled()
    handle = (
        answer.get("response", {}).get("userHandle") if isinstance(answer.get("response"), dict) else None
    )
    try:
        if handle and base64url_to_bytes(handle) != member.id.encode():
            raise PasskeyNotRecognised()
    except _ceremony_errors() as exc:
        raise PasskeyCheckFailed() from exc
    _check_assertion(passkeys, passkey, answer, expected_challenge=challenge.challenge, rp=rp, now=now)
    audit(
        session,
        org_id=member.org_id,
        type="member.signed_in",
        actor=f"member:{member.id}",
        subject_id=member.id,
        data={"passkeyId": passkey.id},
        now=now,
    )
    return member, passkey


def confirmation_options(
    session: Session,
    *,
    rp: RelyingParty,
    member: Member,
    purpose: ChallengePurpose,
    challenge: bytes,
    nonce: bytes,
    now: datetime,
    approval_id: str | None = None,
    policy_change_id: str | None = None,
) -> Ceremony:
    """Options for confirming one decision with one of `member`'s own passkeys, user verified,
    over a challenge the caller computed (it commits to what is decided); the challenge's row keeps
    what is decided (an approval, or a policy change request) and the nonce, so the answer can be
    checked against them."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor, UserVerificationRequirement

    own = PasskeyRepository(session).of_member(_principal(member), member.id)
    options = generate_authentication_options(
        rp_id=rp.rp_id,
        challenge=challenge,
        timeout=int(CONFIRMATION_TTL.total_seconds() * 1000),
        user_verification=UserVerificationRequirement.REQUIRED,
        allow_credentials=[
            PublicKeyCredentialDescriptor(id=base64url_to_bytes(row.credential_id)) for row in own
        ],
    )
    row = WebAuthnChallenge(
        id=new_id("challenge"),
        purpose=purpose,
        challenge=challenge,
        member_id=member.id,
        created_at=now,
        expires_at=now + CONFIRMATION_TTL,
        approval_id=approval_id,
        policy_change_id=policy_change_id,
        nonce=nonce,
    )
    ChallengeRepository(session).add(row)
    return Ceremony(row.id, options_to_json(options))


def verify_confirmation(
    session: Session,
    *,
    rp: RelyingParty,
    member: Member,
    expected_challenge: bytes,
    credential: object,
    now: datetime,
) -> MemberPasskey:
    """The passkey of `member` that signed `expected_challenge`, user verified; anything else
    (another member's passkey, another challenge, no user verification) is PasskeyCheckFailed."""
    answer = _credential(credential)
    passkeys = PasskeyRepository(session)
    passkey = _answering_passkey(passkeys, answer)
    if passkey is None or passkey.member_id != member.id:
        raise PasskeyCheckFailed()
    _check_assertion(passkeys, passkey, answer, expected_challenge=expected_challenge, rp=rp, now=now)
    return passkey


def _answering_passkey(passkeys: PasskeyRepository, answer: dict[str, Any]) -> MemberPasskey | None:
    raw_id = answer.get("rawId") or answer.get("id")
    return passkeys.by_credential_id(raw_id) if isinstance(raw_id, str) and len(raw_id) <= 1400 else None


def _check_assertion(
    passkeys: PasskeyRepository,
    passkey: MemberPasskey,
    answer: dict[str, Any],
    *,
    expected_challenge: bytes,
    rp: RelyingParty,
    now: datetime,
) -> None:
    """The assertion signs `expected_challenge` with `passkey`, user verified, on this site; the
    passkey's counter moves on. Anything else is PasskeyCheckFailed."""
    from webauthn import verify_authentication_response

    try:
        verified = verify_authentication_response(
            credential=answer,
            expected_challenge=expected_challenge,
            expected_rp_id=rp.rp_id,
            expected_origin=rp.origin,
            credential_public_key=passkey.public_key,
            credential_current_sign_count=passkey.sign_count,
            require_user_verification=True,
        )
    except _ceremony_errors() as exc:
        raise PasskeyCheckFailed() from exc
    passkey.sign_count = verified.new_sign_count
    passkey.last_used_at = now
    passkeys.add(passkey)


def passkeys_of(session: Session, principal: Principal) -> list[MemberPasskey]:
    assert principal.member_id is not None
    return list(PasskeyRepository(session).of_member(principal, principal.member_id))


def _own_passkey(session: Session, principal: Principal, passkey_id: str) -> MemberPasskey:
    row = PasskeyRepository(session).get_readable(principal, passkey_id)
    if row is None or row.member_id != principal.member_id:
        raise PasskeyNotFound()
    return row


def rename_passkey(
    session: Session, principal: Principal, *, passkey_id: str, name: object, now: datetime
) -> MemberPasskey:
    row = _own_passkey(session, principal, passkey_id)
    if name is None or (isinstance(name, str) and not name.strip()):
        raise InvalidPasskeyName()
    row.name = passkey_name(name, now=now)
    PasskeyRepository(session).add(row)
    audit(
        session,
        org_id=row.org_id,
        type="passkey.renamed",
        actor=principal.actor,
        subject_id=row.id,
        data={"passkeyId": row.id, "name": row.name},
        now=now,
    )
    return row


def remove_passkey(session: Session, principal: Principal, *, passkey_id: str, now: datetime) -> None:
    """Remove one of the member's passkeys, never the last one: they could not sign in again."""
    passkeys = PasskeyRepository(session)
    row = _own_passkey(session, principal, passkey_id)
    if passkeys.count_of_member(org_id=row.org_id, member_id=row.member_id) <= 1:
        raise LastPasskey()
    passkeys.remove(row)
    # Sessions signed in with it end now (resolve_session would refuse them anyway).
    SessionRepository(session).revoke_of_passkey(row.id, now)
    audit(
        session,
        org_id=row.org_id,
        type="passkey.removed",
        actor=principal.actor,
        subject_id=row.id,
        data={"passkeyId": row.id, "memberId": row.member_id, "name": row.name},
        now=now,
    )


def _credential(value: object) -> dict[str, Any]:
    """The browser's `credential.toJSON()`, as a dict; anything else is a failed ceremony."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise PasskeyCheckFailed() from exc
    if not isinstance(value, dict):
        raise PasskeyCheckFailed()
    return value


def _transports(credential: object) -> list[str]:
    response = _credential(credential).get("response")
    found = response.get("transports") if isinstance(response, dict) else None
    if not isinstance(found, list):
        return []
    return [item for item in found if isinstance(item, str) and item in _known_transports()][:8]
