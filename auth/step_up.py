"""Step-up: a fresh, user-verified assertion by one of a member's own passkeys, asked for before a
change that a session cookie alone must not be able to make (adding a passkey, a change that
widens authority, confirming a change an admin token asked for).

A copied `pw_session` cookie opens the pages, but it holds no passkey: without a step-up it could
register the copier's own passkey, which would then approve payments. So `begin` hands the page a
challenge that commits to the action, the member, the session and a single-use nonce (SHA-256 over
a length-prefixed encoding, as decisions on approvals do), `complete` checks the answer against the
challenge recomputed from the row, and `redeem` spends the verified step-up on the action, once.
All three live in the database (any server process may serve any step), and a step-up is good for
`STEP_UP_TTL` from the moment it was asked for.

A sudo step-up is redeemed by its own verification: from then on, for `PAYWARDEN_SUDO_SECONDS`,
`has_recent_sudo` says yes for that member in that browser session only. A confirmation step-up
names one pending change, and its challenge also commits to that change's hash, so the passkey
signs that exact change and no other.
"""

from __future__ import annotations

import hashlib
import secrets
import struct
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from auth.errors import ChallengeExpired, StepUpRequired
from auth.passkeys import Ceremony, RelyingParty, verify_confirmation
from auth.repository import PasskeyRepository, StepUpRepository
from auth.sessions import SignedIn
from server.audit.service import record as audit
from server.kit.ids import new_id
from server.models import StepUp
from server.vocabulary import StepUpAction

DOMAIN = b"paywarden/step-up/v1"
STEP_UP_TTL = timedelta(minutes=2)
NONCE_BYTES = 32


def _field(value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return struct.pack(">I", len(data)) + data


@dataclass(frozen=True)
class Subject:
    """What a confirmation step-up is about: a pending change's id and its hash (hex)."""

    id: str
    change_hash: str


def challenge_for(row: StepUp, subject: Subject | None = None) -> bytes:
    """What the passkey signs: the action, for whom, in which session, the row's nonce, and for a
    confirmation the pending change's id and hash."""
    fields: list[str | bytes] = [
        str(row.action),
        row.id,
        row.org_id,
        row.member_id,
        row.session_id,
        row.nonce,
    ]
    if row.pending_change_id is not None:
        if subject is None or subject.id != row.pending_change_id:
            raise ChallengeExpired()
        fields += [subject.id, subject.change_hash]
    return hashlib.sha256(DOMAIN + b"".join(_field(item) for item in fields)).digest()


def begin(
    session: Session,
    *,
    rp: RelyingParty,
    signed_in: SignedIn,
    action: StepUpAction,
    now: datetime,
    subject: Subject | None = None,
) -> Ceremony:
    """A challenge that only one of the signed-in member's own passkeys can answer."""
    from webauthn import generate_authentication_options, options_to_json
    from webauthn.helpers import base64url_to_bytes
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor, UserVerificationRequirement

    member = signed_in.member
    own = PasskeyRepository(session).of_member(signed_in.principal, member.id)
    if not own:
        # A member without a passkey gets their first one from an enrolment link only.
        raise StepUpRequired()
    row = StepUp(
        id=new_id("step_up"),
        org_id=member.org_id,
        member_id=member.id,
        session_id=signed_in.session_id,
        action=action,
        nonce=secrets.token_bytes(NONCE_BYTES),
        created_at=now,
        expires_at=now + STEP_UP_TTL,
        pending_change_id=subject.id if subject is not None else None,
    )
    options = generate_authentication_options(
        rp_id=rp.rp_id,
        challenge=challenge_for(row, subject),
        timeout=int(STEP_UP_TTL.total_seconds() * 1000),
        user_verification=UserVerificationRequirement.REQUIRED,
        allow_credentials=[
            PublicKeyCredentialDescriptor(id=base64url_to_bytes(passkey.credential_id)) for passkey in own
        ],
    )
    StepUpRepository(session).add(row)
    return Ceremony(row.id, options_to_json(options))


def claim(session: Session, step_up_id: object, *, signed_in: SignedIn, now: datetime) -> StepUp:
    """Use up this session's step-up before its answer is checked. Callers commit this on its own,
    so a step-up is answered once even when the answer then fails."""
    if not isinstance(step_up_id, str) or len(step_up_id) > 40:
        raise ChallengeExpired()
    row = StepUpRepository(session).claim_answer(
        step_up_id, member_id=signed_in.member.id, session_id=signed_in.session_id, now=now
    )
    if row is None:
        raise ChallengeExpired()
    return row


def complete(
    session: Session,
    *,
    rp: RelyingParty,
    signed_in: SignedIn,
    step_up: StepUp,
    credential: object,
    now: datetime,
    subject: Subject | None = None,
    sudo_seconds: int = 300,
) -> str:
    """Check the answer to a claimed step-up: one of the member's own passkeys, user verified, over
    the challenge recomputed from the row (and the subject, for a confirmation). Returns the
    step-up's id, now redeemable; a sudo is redeemed at once and lasts `sudo_seconds`."""
    if step_up.member_id != signed_in.member.id or step_up.session_id != signed_in.session_id:
        raise ChallengeExpired()
    passkey = verify_confirmation(
        session,
        rp=rp,
        member=signed_in.member,
        expected_challenge=challenge_for(step_up, subject),
        credential=credential,
        now=now,
    )
    step_up.passkey_id = passkey.id
    if step_up.action == StepUpAction.SUDO:
        step_up.redeemed_at = now
        step_up.expires_at = now + timedelta(seconds=sudo_seconds)
    StepUpRepository(session).add(step_up)
    audit(
        session,
        org_id=step_up.org_id,
        type="member.stepped_up",
        actor=f"member:{step_up.member_id}",
        subject_id=step_up.member_id,
        data={"action": str(step_up.action), "passkeyId": passkey.id, "stepUpId": step_up.id},
        now=now,
    )
    return step_up.id


def redeem(
    session: Session, step_up_id: object, *, signed_in: SignedIn, action: StepUpAction, now: datetime
) -> None:
    """Spend a verified step-up of this session on `action`; StepUpRequired when there is none."""
    if not isinstance(step_up_id, str) or len(step_up_id) > 40:
        raise StepUpRequired()
    if not StepUpRepository(session).redeem(
        step_up_id,
        member_id=signed_in.member.id,
        session_id=signed_in.session_id,
        action=action,
        now=now,
    ):
        raise StepUpRequired()


def has_recent_sudo(session: Session, *, member_id: str, session_id: str, now: datetime) -> bool:
    """Whether this member confirmed a sudo with a user-verified passkey in this browser session,
    and it has not lapsed. Read from the database, so every process answers alike."""
    return StepUpRepository(session).live_sudo(member_id=member_id, session_id=session_id, now=now)
