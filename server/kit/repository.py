"""The base of every repository: the only place queries are written.

Each domain has one `repository.py` holding all of its queries, built on these bases. A
`TenantRepository` is for rows that belong to an organisation: its `readable(reader)` statement is
scoped to the reader's organisation, and to the reader's agent for rows that belong to one agent
when the reader is an agent. Every lookup by id for a principal goes through it, so forgetting the
organisation is not possible. Only the operator (the command line) and the system (background jobs)
read across organisations, and they say so (`unrestricted`).

Repositories read and write rows; they never decide, commit, or import a service.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from sqlalchemy import bindparam, false
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import ColumnElement
from sqlmodel import Session, SQLModel, select
from sqlmodel.sql.expression import SelectOfScalar

M = TypeVar("M", bound=SQLModel)


class Reader(Protocol):
    """Who reads: `auth.principal.Principal` is one."""

    @property
    def org_id(self) -> str | None: ...

    @property
    def agent_id(self) -> str | None: ...

    @property
    def unrestricted(self) -> bool: ...


# How a reader is scoped, for statements built once and kept: (unrestricted, of no organisation,
# of one agent). `scoped` adds the clauses with bound values, `scope_params` gives the values.
ReaderShape = tuple[bool, bool, bool]


def reader_shape(reader: Reader) -> ReaderShape:
    unrestricted = reader.unrestricted
    return (
        unrestricted,
        not unrestricted and reader.org_id is None,
        not unrestricted and reader.agent_id is not None,
    )


def scoped(statement: Any, shape: ReaderShape, org: Any, agent: Any | None) -> Any:
    """`statement` limited as `TenantRepository.readable` limits it, with the reader's organisation
    and agent as bound values ("reader_org", "reader_agent") rather than literals."""
    unrestricted, no_org, one_agent = shape
    if unrestricted:
        return statement
    if no_org:
        return statement.where(false())
    statement = statement.where(org == bindparam("reader_org"))
    if one_agent and agent is not None:
        statement = statement.where(agent == bindparam("reader_agent"))
    return statement


def scope_params(reader: Reader, shape: ReaderShape) -> dict[str, Any]:
    unrestricted, no_org, one_agent = shape
    if unrestricted or no_org:
        return {}
    return {"reader_org": reader.org_id, **({"reader_agent": reader.agent_id} if one_agent else {})}


class Repository(Generic[M]):
    model: type[M]

    def __init__(self, session: Session) -> None:
        self.session = session

    def _statement(self) -> SelectOfScalar[M]:
        return select(self.model)

    def _first(self, statement: SelectOfScalar[M]) -> M | None:
        return self.session.exec(statement.limit(1)).first()

    def _all(self, statement: SelectOfScalar[M]) -> Sequence[M]:
        return self.session.exec(statement).all()

    def add(self, row: M, *, flush: bool = True) -> M:
        self.session.add(row)
        if flush:
            self.session.flush()
        return row

    def add_unique(self, row: M) -> bool:
        """Insert `row` in a savepoint; False, and nothing written, when a unique value is taken.

        The savepoint keeps a refused insert from spoiling the rest of the caller's transaction.
        """
        try:
            with self.session.begin_nested():
                self.session.add(row)
        except IntegrityError:
            return False
        return True

    def refresh(self, row: M) -> M:
        self.session.refresh(row)
        return row

    def _column(self, name: str) -> ColumnElement[Any]:
        column: ColumnElement[Any] = getattr(self.model, name)
        return column


class TenantRepository(Repository[M]):
    """Rows of one organisation (`org_column`), and of one agent when `agent_column` is set."""

    org_column: ClassVar[str] = "org_id"
    agent_column: ClassVar[str | None] = None
    id_column: ClassVar[str] = "id"

    def readable(self, reader: Reader) -> SelectOfScalar[M]:
        statement = self._statement()
        if reader.unrestricted:
            return statement
        if reader.org_id is None:
            return statement.where(false())
        statement = statement.where(self._column(self.org_column) == reader.org_id)
        if reader.agent_id is not None and self.agent_column is not None:
            statement = statement.where(self._column(self.agent_column) == reader.agent_id)
        return statement

    def get_readable(self, reader: Reader, row_id: str) -> M | None:
        return self._first(self.readable(reader).where(self._column(self.id_column) == row_id))


# Every public method of a tenant repository takes the reader, the organisation's id, or a row or
# filter that carries it (tests/architecture/test_every_method_is_scoped.py checks), except these,
# each with why it has no organisation to name.
SYSTEM_READS: dict[str, str] = {
    # Found by a secret the caller holds: the row found is what names the organisation.
    "TokenRepository.by_hash": "a bearer token is looked up by its hash before anything is known",
    "TokenRepository.by_hash_with_agent": "the token check of every call, by the token's hash alone",
    "PasskeyRepository.by_credential_id": "a passkey sign-in names only the credential it answers with, "
    "and a new credential must be unique across every organisation",
    # Background jobs, which work for every organisation in turn.
    "ApprovalRepository.lapsed": "the expiry job closes approvals past their time in every organisation",
    "PolicyChangeRepository.lapsed": "the expiry job closes policy change requests past their time in "
    "every organisation",
    "AuditRepository.heads": "the audit anchor job records every organisation's newest event",
    # /metrics: numbers over every organisation, never one organisation's.
    "AuditRepository.newest_created_at": "/metrics reports the age of the newest audit event",
    "IntentRepository.count_by_state": "/metrics reports how many payments are in each state",
    "IntentRepository.authorized_lapsed": "the reconciler fails never-sent intents past validBefore",
    "IntentRepository.in_flight_lapsed": "the reconciler picks up intents whose process died mid-call",
    "IntentRepository.settlement_due": "the settlement checker reads due intents of every organisation",
    "IntentRepository.by_payer_nonce": "the chain watch matches a transfer seen on chain to the intent "
    "that signed it, by payer and the nonce derived from the intent",
    "IntentRepository.open_from_payer": "a sweep waits for every payment from the wallet's address, "
    "in any organisation, that may still move money",
    "IntentRepository.seller_outcomes": "a seller's reliability is counted over every organisation, and "
    "only totals leave the method, never a row",
    "WalletRepository.active_cdp": "the wallet policy job keeps every organisation's CDP wallets' own "
    "policies in step with their agents'",
    "WalletRepository.any_active_cdp": "a server starting loads the CDP SDK ahead when any organisation "
    "has a cdp wallet",
    "WalletRepository.current_with_address": "a sweep never drains an address that is still some "
    "agent's current wallet, in any organisation (the same key imported twice)",
    "TokenRepository.purge_expired": "housekeeping deletes expired tokens of every organisation",
    "NotificationRepository.waiting": "the Slack notifier's outbox is one queue for every organisation",
    "NotificationRepository.waiting_account_changes": "the notifier reads passkey news of every "
    "organisation from the same outbox",
    "NotificationRepository.unannounced": "the notifier finds pending approvals not yet announced anywhere",
    "NotificationRepository.unannounced_account_changes": "the notifier finds passkey events not yet "
    "queued in any organisation",
    "NotificationRepository.claim": "the notifier claims an outbox row it just read, by its id",
    "NotificationRepository.close": "the notifier closes the outbox row it claimed, by its id",
    "NotificationRepository.abandon_stale": "the notifier releases claims of processes that died",
}
