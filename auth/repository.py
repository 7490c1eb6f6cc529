"""Every query of identity: tokens and their refresh families, OAuth clients, grants and codes,
members' passkeys and sessions, WebAuthn challenges, rate-limit counters, and the agents a member
may connect to an application.

Reads for a principal go through `TenantRepository.readable`. A few reads come before there is a
principal, because they are how a request becomes one: a token, a code, a session or a passkey is
found by its secret's hash or its credential id, and an enrolment link by its token's hash.
Conditional updates (`claim_*`) are how two processes racing for one code, one refresh token or
one challenge are told apart: exactly one of them changes the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import CursorResult, and_, bindparam, case, delete, exists, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import col

from server.kit.repository import Reader, Repository, TenantRepository
from server.models import (
    AccessToken,
    Agent,
    AuthorizationCode,
    ClientDocumentFailure,
    Member,
    MemberPasskey,
    OAuthClient,
    OAuthGrant,
    RateLimitBucket,
    StepUp,
    WebAuthnChallenge,
    WebSession,
)
from server.vocabulary import ChallengePurpose, ClientKind, Role, StepUpAction, TokenKind


def _changed(result: Any) -> int:
    return result.rowcount if isinstance(result, CursorResult) else 0


@dataclass(frozen=True)
class TokenCheck:
    """The columns of a token that a check reads, and whether its agent is enabled."""

    id: str
    kind: TokenKind
    org_id: str
    agent_id: str | None
    client_id: str | None
    scopes: str
    audience: str
    expires_at: datetime
    revoked_at: datetime | None
    agent_enabled: bool


_TOKEN_COLUMNS = tuple(field.name for field in fields(TokenCheck) if field.name != "agent_enabled")
_TOKEN_CHECK: list[Any] = []  # the statement of `by_hash_with_agent`, built once


def _token_check_statement() -> Any:
    if not _TOKEN_CHECK:
        tokens = AccessToken.__table__  # type: ignore[attr-defined]
        agents = Agent.__table__  # type: ignore[attr-defined]
        enabled = case((agents.c.id.is_(None), False), (agents.c.disabled_at.is_(None), True), else_=False)
        _TOKEN_CHECK.append(
            select(*(tokens.c[name] for name in _TOKEN_COLUMNS), enabled)
            .select_from(tokens.outerjoin(agents, agents.c.id == tokens.c.agent_id))
            .where(tokens.c.token_hash == bindparam("hash"))
            .limit(1)
        )
    return _TOKEN_CHECK[0]


class TokenRepository(TenantRepository[AccessToken]):
    model = AccessToken
    agent_column: ClassVar[str | None] = "agent_id"

    def by_hash(self, token_hash: str) -> AccessToken | None:
        return self._first(self._statement().where(AccessToken.token_hash == token_hash))

    def by_hash_with_agent(self, token_hash: str) -> TokenCheck | None:
        """What a token check needs of the token, and whether its agent (if it has one) exists and
        is enabled, in one statement (built once and kept, its value bound; no model is loaded)."""
        row = self.session.connection().execute(_token_check_statement(), {"hash": token_hash}).first()
        if row is None:
            return None
        values = dict(zip(_TOKEN_COLUMNS, row[:-1], strict=True))
        return TokenCheck(**values, agent_enabled=bool(row[-1]))

    def newest_labelled(
        self, *, org_id: str, agent_id: str, label: str, audience: str, live_until: datetime
    ) -> AccessToken | None:
        """The agent's newest unrevoked access token with this label and audience that is still
        valid at `live_until`."""
        statement = self._statement().where(
            AccessToken.audience == audience,
            AccessToken.org_id == org_id,
            AccessToken.agent_id == agent_id,
            AccessToken.label == label,
            col(AccessToken.revoked_at).is_(None),
            AccessToken.expires_at > live_until,
        )
        return self._first(statement.order_by(col(AccessToken.created_at).desc()))

    def live_of_org(
        self, reader: Reader, *, org_id: str | None, now: datetime, agent_id: str | None = None
    ) -> list[tuple[AccessToken, datetime | None]]:
        """Access tokens that still work at `now` (not revoked, not expired), newest first, each
        with when its connection was last used (None when it has none or was never used): of one
        organisation, or every one the reader may read with `org_id` None; one agent's with
        `agent_id`."""
        statement = self.readable(reader).where(
            AccessToken.kind == TokenKind.ACCESS,
            col(AccessToken.revoked_at).is_(None),
            col(AccessToken.expires_at) > now,
        )
        if org_id is not None:
            statement = statement.where(AccessToken.org_id == org_id)
        if agent_id is not None:
            statement = statement.where(AccessToken.agent_id == agent_id)
        rows = self._all(statement.order_by(col(AccessToken.created_at).desc(), col(AccessToken.id).desc()))
        grant_ids = {row.grant_id for row in rows if row.grant_id is not None}
        used: dict[str, datetime | None] = {}
        if grant_ids:
            of_grants = select(col(OAuthGrant.id), col(OAuthGrant.last_used_at))
            orgs = {row.org_id for row in rows}
            found = self.session.execute(
                of_grants.where(col(OAuthGrant.id).in_(grant_ids), col(OAuthGrant.org_id).in_(orgs))
            )
            used = {grant_id: last_used for grant_id, last_used in found}
        return [(row, used.get(row.grant_id) if row.grant_id else None) for row in rows]

    def agent_enabled(self, *, org_id: str, agent_id: str) -> bool:
        """Whether the agent exists in the organisation and is not disabled."""
        agent = self.session.get(Agent, agent_id)
        return agent is not None and agent.org_id == org_id and agent.disabled_at is None

    def claim_rotation(self, *, org_id: str, token_id: str, now: datetime) -> bool:
        """Mark a live refresh token as exchanged; False if it already was (or was revoked)."""
        return (
            _changed(
                self.session.execute(
                    update(AccessToken)
                    .where(col(AccessToken.id) == token_id, col(AccessToken.org_id) == org_id)
                    .where(col(AccessToken.rotated_at).is_(None), col(AccessToken.revoked_at).is_(None))
                    .values(rotated_at=now)
                )
            )
            == 1
        )

    def one_of_family(self, *, org_id: str, family_id: str) -> AccessToken | None:
        return self._first(
            self._statement().where(AccessToken.org_id == org_id, AccessToken.family_id == family_id)
        )

    def revoke_family(self, *, org_id: str, family_id: str, now: datetime) -> int:
        """Revoke every live token of one refresh family; how many were live."""
        return _changed(
            self.session.execute(
                update(AccessToken)
                .where(col(AccessToken.org_id) == org_id, col(AccessToken.family_id) == family_id)
                .where(col(AccessToken.revoked_at).is_(None))
                .values(revoked_at=now)
            )
        )

    def live_of_grant(self, org_id: str, grant_id: str) -> Sequence[AccessToken]:
        """Every token of the grant that is still live (access and refresh, of every family)."""
        return self._all(
            self._statement().where(
                AccessToken.org_id == org_id,
                AccessToken.grant_id == grant_id,
                col(AccessToken.revoked_at).is_(None),
            )
        )

    def revoke_of_grant(self, *, org_id: str, grant_id: str, now: datetime) -> int:
        return _changed(
            self.session.execute(
                update(AccessToken)
                .where(col(AccessToken.org_id) == org_id, col(AccessToken.grant_id) == grant_id)
                .where(col(AccessToken.revoked_at).is_(None))
                .values(revoked_at=now)
            )
        )

    def purge_expired(self, before: datetime) -> int:
        """Delete tokens of the authorization server that expired before `before`; tokens issued
        on the command line stay, as the record of what was issued."""
        return _changed(
            self.session.execute(
                delete(AccessToken).where(
                    col(AccessToken.grant_id).is_not(None), col(AccessToken.expires_at) < before
                )
            )
        )


class ClientRepository(Repository[OAuthClient]):
    """OAuth clients belong to no organisation, except the admin clients an operator creates for
    one agent (their `org_id`)."""

    model = OAuthClient

    def by_client_id(self, client_id: str) -> OAuthClient | None:
        return self._first(self._statement().where(OAuthClient.client_id == client_id))

    def note_use(self, row_id: str, now: datetime) -> None:
        self.session.execute(
            update(OAuthClient).where(col(OAuthClient.id) == row_id).values(last_used_at=now)
        )

    def purge_unused(self, *, registered_before: datetime, stale_before: datetime) -> int:
        """Delete clients that never got a grant: registrations older than `registered_before`,
        and cached metadata documents that went stale before `stale_before`."""
        never_granted = ~exists(
            select(col(OAuthGrant.id)).where(col(OAuthGrant.client_id) == col(OAuthClient.id))
        )
        return _changed(
            self.session.execute(
                delete(OAuthClient)
                .where(never_granted)
                .where(
                    or_(
                        and_(
                            col(OAuthClient.kind) == ClientKind.REGISTERED,
                            col(OAuthClient.created_at) < registered_before,
                        ),
                        and_(
                            col(OAuthClient.kind) == ClientKind.METADATA_DOCUMENT,
                            col(OAuthClient.stale_at) < stale_before,
                        ),
                    )
                )
            )
        )


class GrantRepository(TenantRepository[OAuthGrant]):
    """Connections: which client acts for which agent, with which scopes."""

    model = OAuthGrant
    agent_column: ClassVar[str | None] = "agent_id"

    def live_for(self, *, org_id: str, client_row_id: str, agent_id: str) -> OAuthGrant | None:
        return self._first(
            self._statement().where(
                OAuthGrant.org_id == org_id,
                OAuthGrant.client_id == client_row_id,
                OAuthGrant.agent_id == agent_id,
                col(OAuthGrant.revoked_at).is_(None),
            )
        )

    def lock(self, org_id: str, grant_id: str) -> OAuthGrant | None:
        """The grant as it is now, its row locked until the transaction ends (SELECT ... FOR
        UPDATE; SQLite's writers are serialised already), so a narrowing or a revocation and a
        token issued from the grant happen one after the other, never interleaved."""
        return self.session.exec(
            self._statement()
            .where(OAuthGrant.id == grant_id, OAuthGrant.org_id == org_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        ).first()

    def live_of_org(self, reader: Reader) -> list[tuple[OAuthGrant, OAuthClient, Agent]]:
        """The reader's organisation's live connections, most recently used first."""
        grants = self._all(
            self.readable(reader)
            .where(col(OAuthGrant.revoked_at).is_(None))
            .order_by(
                col(OAuthGrant.last_used_at).desc().nulls_last(),
                col(OAuthGrant.created_at).desc(),
            )
        )
        found: list[tuple[OAuthGrant, OAuthClient, Agent]] = []
        for grant in grants:
            client = self.session.get(OAuthClient, grant.client_id)
            agent = self.session.get(Agent, grant.agent_id)
            if client is not None and agent is not None:
                found.append((grant, client, agent))
        return found

    def touch_for_token(self, *, org_id: str, token_id: str, now: datetime, not_since: datetime) -> None:
        """Note that the grant behind a token was used, unless it was noted since `not_since`."""
        grant_of_token = (
            select(col(AccessToken.grant_id))
            .where(col(AccessToken.id) == token_id, col(AccessToken.org_id) == org_id)
            .scalar_subquery()
        )
        self.session.execute(
            update(OAuthGrant)
            .where(col(OAuthGrant.org_id) == org_id, col(OAuthGrant.id) == grant_of_token)
            .where(or_(col(OAuthGrant.last_used_at).is_(None), col(OAuthGrant.last_used_at) < not_since))
            .values(last_used_at=now)
        )


class CodeRepository(Repository[AuthorizationCode]):
    model = AuthorizationCode

    def by_hash(self, code_hash: str) -> AuthorizationCode | None:
        return self.session.get(AuthorizationCode, code_hash)

    def claim(self, code_hash: str, now: datetime) -> bool:
        """Use a code; False if it was used before."""
        return (
            _changed(
                self.session.execute(
                    update(AuthorizationCode)
                    .where(col(AuthorizationCode.code_hash) == code_hash)
                    .where(col(AuthorizationCode.used_at).is_(None))
                    .values(used_at=now)
                )
            )
            == 1
        )

    def unused_of_grant(self, org_id: str, grant_id: str, now: datetime) -> Sequence[AuthorizationCode]:
        """The grant's codes that were not exchanged yet and have not expired."""
        return self._all(
            self._statement().where(
                AuthorizationCode.org_id == org_id,
                AuthorizationCode.grant_id == grant_id,
                col(AuthorizationCode.used_at).is_(None),
                col(AuthorizationCode.expires_at) > now,
            )
        )

    def purge_expired(self, before: datetime) -> int:
        return _changed(
            self.session.execute(delete(AuthorizationCode).where(col(AuthorizationCode.expires_at) < before))
        )


class MemberAccountRepository(Repository[Member]):
    """Members as identity sees them: found by an enrolment token's hash or by the id a session
    names, before any principal exists."""

    model = Member

    def by_enroll_hash(self, token_hash: str) -> Member | None:
        return self._first(self._statement().where(Member.enroll_token_hash == token_hash))

    def by_id(self, member_id: str) -> Member | None:
        return self.session.get(Member, member_id)


class PasskeyRepository(TenantRepository[MemberPasskey]):
    model = MemberPasskey

    def by_credential_id(self, credential_id: str) -> MemberPasskey | None:
        return self._first(self._statement().where(MemberPasskey.credential_id == credential_id))

    def of_member(self, reader: Reader, member_id: str) -> Sequence[MemberPasskey]:
        return self._all(
            self.readable(reader)
            .where(MemberPasskey.member_id == member_id)
            .order_by(col(MemberPasskey.created_at), col(MemberPasskey.id))
        )

    def count_of_member(self, *, org_id: str, member_id: str) -> int:
        return int(
            self.session.execute(
                select(func.count())
                .select_from(MemberPasskey)
                .where(col(MemberPasskey.org_id) == org_id, col(MemberPasskey.member_id) == member_id)
            ).scalar_one()
        )

    def counts_of_org(self, *, org_id: str) -> dict[str, int]:
        """How many passkeys each member of the organisation has, by member id."""
        rows = self.session.execute(
            select(col(MemberPasskey.member_id), func.count())
            .where(col(MemberPasskey.org_id) == org_id)
            .group_by(col(MemberPasskey.member_id))
        )
        return {str(member_id): int(count) for member_id, count in rows}

    def remove(self, row: MemberPasskey) -> None:
        self.session.delete(row)
        self.session.flush()


class SessionRepository(Repository[WebSession]):
    model = WebSession

    def by_id(self, session_id: str) -> WebSession | None:
        return self.session.get(WebSession, session_id)

    def revoke(self, session_id: str, now: datetime) -> None:
        self.session.execute(
            update(WebSession)
            .where(col(WebSession.id) == session_id, col(WebSession.revoked_at).is_(None))
            .values(revoked_at=now)
        )

    def last_started_of_org(self, *, org_id: str) -> dict[str, datetime]:
        """When each member of the organisation last signed in (their newest session), by member id."""
        rows = self.session.execute(
            select(col(WebSession.member_id), func.max(col(WebSession.created_at)))
            .where(col(WebSession.org_id) == org_id)
            .group_by(col(WebSession.member_id))
        )
        return {str(member_id): started for member_id, started in rows if started is not None}

    def revoke_of_member(self, member_id: str, now: datetime) -> int:
        """End every live session of a member ("sign out everywhere")."""
        return _changed(
            self.session.execute(
                update(WebSession)
                .where(col(WebSession.member_id) == member_id, col(WebSession.revoked_at).is_(None))
                .values(revoked_at=now)
            )
        )

    def revoke_of_passkey(self, passkey_id: str, now: datetime) -> int:
        """End every live session that was signed in with a passkey."""
        return _changed(
            self.session.execute(
                update(WebSession)
                .where(col(WebSession.passkey_id) == passkey_id, col(WebSession.revoked_at).is_(None))
                .values(revoked_at=now)
            )
        )

    def purge_expired(self, before: datetime) -> int:
        return _changed(self.session.execute(delete(WebSession).where(col(WebSession.expires_at) < before)))


class StepUpRepository(Repository[StepUp]):
    model = StepUp

    def claim_answer(
        self, step_up_id: str, *, member_id: str, session_id: str, now: datetime
    ) -> StepUp | None:
        """Take this session's live, unanswered step-up for checking its answer, once."""
        claimed = _changed(
            self.session.execute(
                update(StepUp)
                .where(col(StepUp.id) == step_up_id)
                .where(col(StepUp.member_id) == member_id, col(StepUp.session_id) == session_id)
                .where(col(StepUp.answered_at).is_(None), col(StepUp.expires_at) > now)
                .values(answered_at=now)
            )
        )
        return self.session.get(StepUp, step_up_id) if claimed == 1 else None

    def redeem(
        self, step_up_id: str, *, member_id: str, session_id: str, action: StepUpAction, now: datetime
    ) -> bool:
        """Use a verified, live step-up of this session for `action`, once."""
        return (
            _changed(
                self.session.execute(
                    update(StepUp)
                    .where(col(StepUp.id) == step_up_id, col(StepUp.action) == action)
                    .where(col(StepUp.member_id) == member_id, col(StepUp.session_id) == session_id)
                    .where(col(StepUp.passkey_id).is_not(None), col(StepUp.redeemed_at).is_(None))
                    .where(col(StepUp.expires_at) > now)
                    .values(redeemed_at=now)
                )
            )
            == 1
        )

    def live_sudo(self, *, member_id: str, session_id: str, now: datetime) -> bool:
        """A verified sudo of this member in this session that has not lapsed."""
        query = (
            select(col(StepUp.id))
            .where(col(StepUp.action) == StepUpAction.SUDO)
            .where(col(StepUp.member_id) == member_id, col(StepUp.session_id) == session_id)
            .where(col(StepUp.passkey_id).is_not(None), col(StepUp.redeemed_at).is_not(None))
            .where(col(StepUp.redeemed_at) <= now, col(StepUp.expires_at) > now)
            .limit(1)
        )
        return self.session.execute(query).first() is not None

    def purge_expired(self, before: datetime) -> int:
        return _changed(self.session.execute(delete(StepUp).where(col(StepUp.expires_at) < before)))


class ChallengeRepository(Repository[WebAuthnChallenge]):
    model = WebAuthnChallenge

    def claim(
        self, challenge_id: str, *, purpose: ChallengePurpose, now: datetime
    ) -> WebAuthnChallenge | None:
        """Use a live challenge of this purpose once; None if there is none to use."""
        claimed = _changed(
            self.session.execute(
                update(WebAuthnChallenge)
                .where(col(WebAuthnChallenge.id) == challenge_id)
                .where(col(WebAuthnChallenge.purpose) == purpose)
                .where(col(WebAuthnChallenge.used_at).is_(None), col(WebAuthnChallenge.expires_at) > now)
                .values(used_at=now)
            )
        )
        return self.session.get(WebAuthnChallenge, challenge_id) if claimed == 1 else None

    def purge_expired(self, before: datetime) -> int:
        return _changed(
            self.session.execute(delete(WebAuthnChallenge).where(col(WebAuthnChallenge.expires_at) < before))
        )


class RateLimitRepository(Repository[RateLimitBucket]):
    model = RateLimitBucket

    def count(self, *, key: str, window_start: int, expires_at: datetime) -> int:
        """Count one more request in `key`'s window starting at `window_start`, atomically (one
        INSERT ... ON CONFLICT DO UPDATE on both databases); the count so far, this one included."""
        dialect = self.session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        table = RateLimitBucket.__table__  # type: ignore[attr-defined]
        values = insert(table).values(key=key, window_start=window_start, count=1, expires_at=expires_at)
        upsert = values.on_conflict_do_update(
            index_elements=[table.c.key],
            set_={
                "count": case(
                    (table.c.window_start == values.excluded.window_start, table.c.count + 1), else_=1
                ),
                "window_start": values.excluded.window_start,
                "expires_at": values.excluded.expires_at,
            },
        ).returning(table.c.count)
        return int(self.session.execute(upsert).scalar_one())

    def purge_expired(self, before: datetime) -> int:
        return _changed(
            self.session.execute(delete(RateLimitBucket).where(col(RateLimitBucket.expires_at) < before))
        )


class DocumentFailureRepository(Repository[ClientDocumentFailure]):
    """Client metadata documents that failed, by the SHA-256 of their URL. They belong to no
    organisation: a client ID URL is global, like the client it names."""

    model = ClientDocumentFailure

    def current(self, url_hash: str, now: datetime) -> ClientDocumentFailure | None:
        """The remembered failure of this URL, unless it is time to try the URL again."""
        row = self.session.get(ClientDocumentFailure, url_hash)
        return row if row is not None and row.retry_at > now else None

    def remember(self, row: ClientDocumentFailure) -> None:
        """Store (or replace) a failure; two processes storing one at once both succeed."""
        dialect = self.session.get_bind().dialect.name
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        table = ClientDocumentFailure.__table__  # type: ignore[attr-defined]
        values = insert(table).values(
            url_hash=row.url_hash,
            url=row.url,
            reason=row.reason,
            failed_at=row.failed_at,
            retry_at=row.retry_at,
        )
        self.session.execute(
            values.on_conflict_do_update(
                index_elements=[table.c.url_hash],
                set_={
                    "reason": values.excluded.reason,
                    "failed_at": values.excluded.failed_at,
                    "retry_at": values.excluded.retry_at,
                },
            )
        )

    def forget(self, url_hash: str) -> None:
        self.session.execute(
            delete(ClientDocumentFailure).where(col(ClientDocumentFailure.url_hash) == url_hash)
        )

    def purge_expired(self, before: datetime) -> int:
        return _changed(
            self.session.execute(
                delete(ClientDocumentFailure).where(col(ClientDocumentFailure.retry_at) < before)
            )
        )


class DelegableAgentRepository(TenantRepository[Agent]):
    """The agents a member may connect to an application (see auth/delegation.py): owners and
    admins any enabled agent of the organisation, everyone else the agents they are the person of."""

    model = Agent
    agent_column: ClassVar[str | None] = "id"

    def delegable(self, reader: Reader, member: Member) -> Sequence[Agent]:
        statement = self.readable(reader).where(col(Agent.disabled_at).is_(None))
        if member.role not in (Role.OWNER, Role.ADMIN):
            statement = statement.where(Agent.member_id == member.id)
        return self._all(statement.order_by(col(Agent.name), col(Agent.id)))
