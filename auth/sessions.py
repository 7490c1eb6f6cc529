"""Members' browser sessions and the CSRF tokens of every form.

A session is a row; the browser holds only a random secret in an HttpOnly cookie (Secure on
https), and the row's id is the secret's SHA-256, so a copy of the database opens no session.
Any server process can read it.

CSRF tokens are not stored: a form's token is an HMAC, under a key derived from the master key, of
what the browser already holds: its session secret once signed in, and before that a random
"browser" cookie. A page from another site cannot read either cookie, so it cannot make the token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session

from auth.errors import CsrfFailed
from auth.principal import Principal
from auth.repository import MemberAccountRepository, PasskeyRepository, SessionRepository
from server.audit.service import record as audit
from server.models import Member, WebSession

SESSION_COOKIE = "pw_session"
BROWSER_COOKIE = "pw_browser"
_SECRET_BYTES = 32


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def new_browser_secret() -> str:
    return secrets.token_urlsafe(_SECRET_BYTES)


@dataclass(frozen=True)
class SignedIn:
    """The member a browser session belongs to, and the principal pages act as for them."""

    session_id: str
    member: Member
    passkey_id: str | None

    @property
    def principal(self) -> Principal:
        return Principal.for_member(org_id=self.member.org_id, member_id=self.member.id)


def start_session(
    session: Session, *, member: Member, passkey_id: str | None, ttl_seconds: int, now: datetime
) -> str:
    """A new session for `member`; returns the cookie's secret (shown to the browser only)."""
    secret = secrets.token_urlsafe(_SECRET_BYTES)
    SessionRepository(session).add(
        WebSession(
            id=_hash(secret),
            org_id=member.org_id,
            member_id=member.id,
            passkey_id=passkey_id,
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_seconds),
        )
    )
    return secret


def resolve_session(session: Session, secret: str | None, *, now: datetime) -> SignedIn | None:
    """The live session this cookie secret opens, or None. A session lasts only as long as the
    passkey it was signed in with and the member's membership: removing that passkey, or
    disabling the member, ends it at once."""
    if not secret or len(secret) > 100:
        return None
    row = SessionRepository(session).by_id(_hash(secret))
    if row is None or row.revoked_at is not None or row.expires_at <= now:
        return None
    member = MemberAccountRepository(session).by_id(row.member_id)
    if member is None or member.disabled_at is not None:
        return None
    signed_in = SignedIn(session_id=row.id, member=member, passkey_id=row.passkey_id)
    passkey = (
        PasskeyRepository(session).get_readable(signed_in.principal, row.passkey_id)
        if row.passkey_id
        else None
    )
    if passkey is None or passkey.member_id != member.id:
        return None
    return signed_in


def end_session(session: Session, secret: str | None, *, now: datetime) -> None:
    if secret and len(secret) <= 100:
        SessionRepository(session).revoke(_hash(secret), now)


def end_all_sessions(session: Session, principal: Principal, *, now: datetime) -> int:
    """Sign the member out everywhere: every live session of theirs ends, this one included."""
    assert principal.member_id is not None
    assert principal.org_id is not None
    ended = SessionRepository(session).revoke_of_member(principal.member_id, now)
    audit(
        session,
        org_id=principal.org_id,
        type="member.signed_out_everywhere",
        actor=principal.actor,
        subject_id=principal.member_id,
        data={"sessionsEnded": ended},
        now=now,
    )
    return ended


def end_sessions_of_member(session: Session, *, member_id: str, now: datetime) -> int:
    """End every live session of a member (when they are disabled): enabling them again later
    does not bring those sessions back."""
    return SessionRepository(session).revoke_of_member(member_id, now)


@dataclass(frozen=True)
class MemberActivity:
    """What the members page says of each member's passkeys and sign-ins."""

    passkeys: int
    last_sign_in: datetime | None


def member_activity(session: Session, principal: Principal, *, org_id: str) -> dict[str, MemberActivity]:
    """Passkey counts and last sign-in of the organisation's members, by member id (a member
    of another organisation reads nothing)."""
    if principal.org_id is not None and principal.org_id != org_id:
        return {}
    counts = PasskeyRepository(session).counts_of_org(org_id=org_id)
    started = SessionRepository(session).last_started_of_org(org_id=org_id)
    return {
        member_id: MemberActivity(passkeys=counts.get(member_id, 0), last_sign_in=started.get(member_id))
        for member_id in {*counts, *started}
    }


@dataclass(frozen=True)
class Csrf:
    """Makes and checks form tokens, bound to what the browser holds (see the module docstring)."""

    key: bytes

    def token(self, anchor: str) -> str:
        return hmac.new(self.key, b"csrf:" + anchor.encode(), hashlib.sha256).hexdigest()

    def check(self, anchor: str | None, given: str | None) -> None:
        # Compared as bytes: a posted token may hold any character, and is then simply wrong.
        if not anchor or not given or not hmac.compare_digest(self.token(anchor).encode(), given.encode()):
            raise CsrfFailed()
