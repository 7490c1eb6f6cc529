"""Every query of the payments domain: intents and their counted spend, out-of-policy findings, and
how far the chain watch has read.

Counting rule, in one place (`counted`): a payment counts from its authorisation. A failed or
expired one keeps counting until the chain says it cannot settle (`lapse_block`, recorded by the
reconciler), never on this server's clock; one whose signed authorisation never left Paywarden
stops counting at once (its failure code says so).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import Integer, and_, bindparam, case, false, func, or_
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from server.kit.repository import (
    Reader,
    ReaderShape,
    Repository,
    TenantRepository,
    reader_shape,
    scope_params,
    scoped,
)
from server.models import (
    Agent,
    ChainScanCursor,
    Organization,
    OutOfPolicyFinding,
    PaymentIntent,
    SellerCircuit,
    Wallet,
    WalletSweep,
)
from server.vocabulary import IntentStatus, PaymentSender, RuleScope

COUNTED = (
    IntentStatus.AUTHORIZED,
    IntentStatus.SUBMITTED,
    IntentStatus.SETTLEMENT_PENDING,
    IntentStatus.SETTLED,
)
COUNTED_UNTIL_LAPSED = (IntentStatus.FAILED, IntentStatus.EXPIRED)
# The signed authorisation left this process: the organisation may have paid this payee.
SENT = (IntentStatus.SUBMITTED, IntentStatus.SETTLEMENT_PENDING, IntentStatus.SETTLED)
IN_FLIGHT = (IntentStatus.SUBMITTED, IntentStatus.SETTLEMENT_PENDING)
# A sent payment the seller served (whether or not the chain shows it yet), and every sent payment
# whose outcome is known: the measure of a seller's reliability.
SERVED = (IntentStatus.SETTLEMENT_PENDING, IntentStatus.SETTLED)
OUTCOME_KNOWN = (*SERVED, IntentStatus.FAILED, IntentStatus.EXPIRED)


def _never_left(never_sent: Collection[str]) -> Any:
    return and_(col(PaymentIntent.failure_code).is_not(None), col(PaymentIntent.failure_code).in_(never_sent))


def counted(never_sent: Collection[str]) -> Any:
    """Intents that count against the caps. `never_sent`: the failure codes of payments whose
    signed authorisation never left Paywarden (server/payments/errors.py)."""
    return or_(
        col(PaymentIntent.status).in_(COUNTED),
        and_(
            col(PaymentIntent.status).in_(COUNTED_UNTIL_LAPSED),
            col(PaymentIntent.authorized_at).is_not(None),  # a held payment that closed never counted
            col(PaymentIntent.lapse_block).is_(None),
            ~_never_left(never_sent),
        ),
    )


@dataclass(frozen=True)
class SellerOutcomes:
    """Sent payments to one seller over a period, across organisations: totals only."""

    organisations: int
    payments: int
    served: int


@dataclass(frozen=True)
class PaymentFilter:
    """Which of a reader's payments a list shows: by organisation (for a reader who sees several),
    agent, status, and created time [since, until)."""

    org_id: str | None = None
    agent_id: str | None = None
    status: IntentStatus | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True)
class SpendFilter:
    """Which intents a sum of spend covers: one organisation, narrowed to a scope (an agent, every
    agent of a team or of a member, or the whole organisation) and to a host and path."""

    org_id: str
    scope: RuleScope
    scope_id: str | None  # the agent, team or member; None (for a team or member) matches nothing
    host_pattern: str | None = None  # exact host, or *.domain for subdomains only
    path_prefix: str | None = None


def _spend_clauses(spend: SpendFilter) -> list[Any]:
    """What narrows an organisation's intents to those `spend` selects (scope, host, path)."""
    clauses: list[Any] = []
    agents_of = {RuleScope.TEAM: Agent.team_id, RuleScope.MEMBER: Agent.member_id}
    if spend.scope != RuleScope.ORG and spend.scope_id is None:
        clauses.append(false())  # a team or member rule, seen from an agent outside any
    elif spend.scope == RuleScope.AGENT:
        clauses.append(col(PaymentIntent.agent_id) == spend.scope_id)
    elif spend.scope in agents_of:
        members = select(Agent.id).where(agents_of[spend.scope] == spend.scope_id)
        clauses.append(col(PaymentIntent.agent_id).in_(members))
    host = col(PaymentIntent.host)
    if spend.host_pattern is not None:
        if spend.host_pattern.startswith("*."):
            suffix = spend.host_pattern[1:]  # ".example.com": subdomains only, never the apex
            clauses.append(func.length(host) > len(suffix))
            clauses.append(func.substr(host, func.length(host) - len(suffix) + 1) == suffix)
        else:
            clauses.append(host == spend.host_pattern)
    if spend.path_prefix is not None:
        # substr, not LIKE: LIKE ignores case on SQLite and treats % and _ as wildcards.
        prefix = spend.path_prefix
        clauses.append(func.substr(col(PaymentIntent.path), 1, len(prefix)) == prefix)
    return clauses


# Built statements of counted_spends, by shape; a process sees few shapes (rule sets), so few stay.
_STATEMENTS_KEPT = 512
_SPENDS_STATEMENTS: dict[tuple[Any, ...], Any] = {}
_Shape = tuple[str, str | None, bool]  # scope ("none" selects nothing), host ("exact", "wild"), path


def _shape(spend: SpendFilter) -> _Shape:
    scope = "none" if spend.scope != RuleScope.ORG and spend.scope_id is None else str(spend.scope)
    host = (
        None if spend.host_pattern is None else ("wild" if spend.host_pattern.startswith("*.") else "exact")
    )
    return (scope, host, spend.path_prefix is not None)


def _shape_values(index: int, spend: SpendFilter, since: datetime) -> dict[str, Any]:
    """The values `_spends_statement` binds for the `index`th sum."""
    values: dict[str, Any] = {f"since_{index}": since, f"scope_{index}": spend.scope_id}
    if spend.host_pattern is not None:
        if spend.host_pattern.startswith("*."):
            suffix = spend.host_pattern[1:]  # ".example.com": subdomains only, never the apex
            values[f"suffix_{index}"] = suffix
            values[f"suffix_len_{index}"] = len(suffix)
        else:
            values[f"host_{index}"] = spend.host_pattern
    if spend.path_prefix is not None:
        values[f"prefix_{index}"] = spend.path_prefix
        values[f"prefix_len_{index}"] = len(spend.path_prefix)
    return values


def _spends_statement(shapes: tuple[_Shape, ...], never_sent: Collection[str]) -> Any:
    authorized = col(PaymentIntent.authorized_at)
    amount = col(PaymentIntent.amount_atomic)
    host = col(PaymentIntent.host)
    agent = col(PaymentIntent.agent_id)
    agents_of = {str(RuleScope.TEAM): Agent.team_id, str(RuleScope.MEMBER): Agent.member_id}
    columns: list[Any] = []
    for index, (scope, host_kind, has_path) in enumerate(shapes):
        clauses: list[Any] = [authorized >= bindparam(f"since_{index}")]
        if scope == "none":
            clauses.append(false())  # a team or member rule, seen from an agent outside any
        elif scope == RuleScope.AGENT:
            clauses.append(agent == bindparam(f"scope_{index}"))
        elif scope in agents_of:
            members = select(Agent.id).where(agents_of[scope] == bindparam(f"scope_{index}"))
            clauses.append(agent.in_(members))
        if host_kind == "wild":
            length = bindparam(f"suffix_len_{index}", type_=Integer)
            clauses.append(func.length(host) > length)
            clauses.append(func.substr(host, func.length(host) - length + 1) == bindparam(f"suffix_{index}"))
        elif host_kind == "exact":
            clauses.append(host == bindparam(f"host_{index}"))
        if has_path:
            # substr, not LIKE: LIKE ignores case on SQLite and treats % and _ as wildcards.
            length = bindparam(f"prefix_len_{index}", type_=Integer)
            clauses.append(func.substr(col(PaymentIntent.path), 1, length) == bindparam(f"prefix_{index}"))
        selects = and_(*clauses)
        columns.append(func.coalesce(func.sum(case((selects, amount), else_=0)), 0))
        columns.append(func.coalesce(func.sum(case((selects, 1), else_=0)), 0))
    return (
        select(*columns)
        .where(col(PaymentIntent.org_id) == bindparam("org"))
        .where(authorized >= bindparam("earliest"))
        .where(counted(never_sent))
    )


class IntentRepository(TenantRepository[PaymentIntent]):
    model = PaymentIntent
    agent_column = "agent_id"

    def find_by_key(self, reader: Reader, *, agent_id: str, key: str) -> PaymentIntent | None:
        return self._first(
            self.readable(reader).where(
                PaymentIntent.agent_id == agent_id, PaymentIntent.idempotency_key == key
            )
        )

    def failed_with(self, reader: Reader, *, intent_ids: Collection[str], failure_code: str) -> set[str]:
        """Which of these intents (the reader may read) failed with `failure_code`."""
        if not intent_ids:
            return set()
        statement = self.readable(reader).where(
            col(PaymentIntent.id).in_(list(intent_ids)), PaymentIntent.failure_code == failure_code
        )
        return {row.id for row in self._all(statement)}

    def sent_by(self, reader: Reader, *, intent_ids: Collection[str], sender: PaymentSender) -> set[str]:
        """Which of these intents (the reader may read) were, or will be, sent by `sender`."""
        if not intent_ids:
            return set()
        statement = self.readable(reader).where(
            col(PaymentIntent.id).in_(list(intent_ids)), PaymentIntent.sent_by == sender
        )
        return {row.id for row in self._all(statement)}

    def newest(
        self, reader: Reader, *, agent_id: str, limit: int, status: IntentStatus | None
    ) -> Sequence[PaymentIntent]:
        statement = self.readable(reader).where(PaymentIntent.agent_id == agent_id)
        if status is not None:
            statement = statement.where(PaymentIntent.status == status)
        order = (col(PaymentIntent.created_at).desc(), col(PaymentIntent.id).desc())
        return self._all(statement.order_by(*order).limit(limit))

    def page(
        self, reader: Reader, only: PaymentFilter, *, after: tuple[datetime, str] | None, limit: int
    ) -> Sequence[PaymentIntent]:
        """The reader's payments, newest first, filtered, from just after `after` (the created time
        and id of the last row of the page before)."""
        statement = self.readable(reader)
        if only.org_id is not None:
            statement = statement.where(PaymentIntent.org_id == only.org_id)
        if only.agent_id is not None:
            statement = statement.where(PaymentIntent.agent_id == only.agent_id)
        if only.status is not None:
            statement = statement.where(PaymentIntent.status == only.status)
        if only.since is not None:
            statement = statement.where(col(PaymentIntent.created_at) >= only.since)
        if only.until is not None:
            statement = statement.where(col(PaymentIntent.created_at) < only.until)
        if after is not None:
            created, intent_id = after
            statement = statement.where(
                or_(
                    col(PaymentIntent.created_at) < created,
                    and_(col(PaymentIntent.created_at) == created, col(PaymentIntent.id) < intent_id),
                )
            )
        order = (col(PaymentIntent.created_at).desc(), col(PaymentIntent.id).desc())
        return self._all(statement.order_by(*order).limit(limit))

    def counted_spend(
        self, spend: SpendFilter, *, since: datetime, never_sent: Collection[str]
    ) -> tuple[int, int]:
        """(atomic amount, number of payments) counted since `since` for the intents `spend` selects."""
        row = self.session.exec(
            select(func.coalesce(func.sum(PaymentIntent.amount_atomic), 0), func.count())
            .where(col(PaymentIntent.org_id) == spend.org_id)
            .where(*_spend_clauses(spend))
            .where(col(PaymentIntent.authorized_at) >= since)
            .where(counted(never_sent))
        ).one()
        return int(row[0]), int(row[1])

    def counted_spends(
        self, spends: Sequence[tuple[SpendFilter, datetime]], *, never_sent: Collection[str]
    ) -> list[tuple[int, int]]:
        """`counted_spend` for each (filter, since) of one organisation, in one statement: the rows
        of the organisation since the earliest `since`, each summed where its filter selects it.

        The statement is built once per shape (which scopes, host and path conditions) and kept,
        its values bound as parameters, so a decision or a budget only fills it in."""
        if not spends:
            return []
        orgs = {spend.org_id for spend, _ in spends}
        if len(orgs) != 1:
            raise ValueError("counted_spends sums the spend of one organisation")
        params: dict[str, Any] = {"org": orgs.pop(), "earliest": min(since for _, since in spends)}
        shapes = []
        for index, (spend, since) in enumerate(spends):
            shapes.append(_shape(spend))
            params.update(_shape_values(index, spend, since))
        key = (tuple(shapes), tuple(sorted(never_sent)))
        statement = _SPENDS_STATEMENTS.get(key)
        if statement is None:
            statement = _spends_statement(key[0], never_sent)
            if len(_SPENDS_STATEMENTS) >= _STATEMENTS_KEPT:
                _SPENDS_STATEMENTS.clear()
            _SPENDS_STATEMENTS[key] = statement
        row = self.session.connection().execute(statement, params).one()  # columns only: no ORM work
        return [(int(row[2 * i]), int(row[2 * i + 1])) for i in range(len(spends))]

    def counted_since(
        self, reader: Reader, *, since: datetime, never_sent: Collection[str]
    ) -> list[tuple[str, datetime, int]]:
        """The reader's intents that count against the caps, authorised at or after `since`: their
        agent, when they were authorised, and their amount (columns only, for sums by day)."""
        if reader.org_id is None:
            return []
        authorized = col(PaymentIntent.authorized_at)
        statement = (
            select(col(PaymentIntent.agent_id), authorized, col(PaymentIntent.amount_atomic))
            .where(col(PaymentIntent.org_id) == reader.org_id)
            .where(authorized >= since)
            .where(counted(never_sent))
        )
        if reader.agent_id is not None:
            statement = statement.where(col(PaymentIntent.agent_id) == reader.agent_id)
        rows = self.session.exec(statement)
        return [(str(agent), when, int(amount)) for agent, when, amount in rows if when is not None]

    def count_by_state(self) -> dict[str, int]:
        """How many payments are in each state, over every organisation (a system read: metrics)."""
        found = self.session.exec(
            select(PaymentIntent.status, func.count()).group_by(col(PaymentIntent.status))
        )
        return {str(state): int(count) for state, count in found}

    def pay_to_known(self, *, org_id: str, pay_to: str) -> bool:
        """Whether the organisation ever sent a payment to this payee (any agent)."""
        return bool(self.known_payees(org_id=org_id, payees=[pay_to]))

    def known_payees(self, *, org_id: str, payees: Collection[str]) -> set[str]:
        """Which of `payees` (answered lower-case) the organisation ever sent a payment to."""
        wanted = sorted({payee.lower() for payee in payees})
        if not wanted:
            return set()
        found = self.session.exec(
            select(func.lower(PaymentIntent.pay_to))
            .where(PaymentIntent.org_id == org_id)
            .where(func.lower(PaymentIntent.pay_to).in_(wanted))
            .where(col(PaymentIntent.status).in_(SENT))
            .distinct()
        )
        return {str(payee) for payee in found}

    def seller_outcomes(self, *, hosts: Collection[str], since: datetime) -> dict[str, SellerOutcomes]:
        """Per host, over every organisation: payments sent since `since` whose outcome is known
        (served, or failed or expired), how many were served, and by how many organisations.
        Only these totals leave this method, never a row of any organisation."""
        wanted = sorted(set(hosts))
        if not wanted:
            return {}
        served = col(PaymentIntent.status).in_(SERVED)
        rows = self.session.exec(
            select(
                PaymentIntent.host,
                func.count(func.distinct(PaymentIntent.org_id)),
                func.count(),
                func.sum(case((served, 1), else_=0)),
            )
            .where(col(PaymentIntent.host).in_(wanted))
            .where(col(PaymentIntent.submitted_at) >= since)
            .where(col(PaymentIntent.status).in_(OUTCOME_KNOWN))
            .group_by(col(PaymentIntent.host))
        )
        return {
            str(host): SellerOutcomes(int(orgs), int(payments), int(successes or 0))
            for host, orgs, payments, successes in rows
        }

    def by_payer_nonce(self, *, payer: str, nonce: str) -> PaymentIntent | None:
        return self._first(
            self._statement().where(
                func.lower(PaymentIntent.payer) == payer.lower(), PaymentIntent.nonce == nonce.lower()
            )
        )

    # -- what the background jobs look at (system reads, across organisations) ----------

    def authorized_lapsed(self, *, now_unix: int, limit: int) -> Sequence[str]:
        """Authorised intents past validBefore: never sent, so never able to move money."""
        return self.session.exec(
            select(PaymentIntent.id)
            .where(PaymentIntent.status == IntentStatus.AUTHORIZED)
            .where(col(PaymentIntent.valid_before) < now_unix)
            .limit(limit)
        ).all()

    def in_flight_lapsed(self, *, cutoff_unix: int, limit: int) -> Sequence[PaymentIntent]:
        return self._all(
            self._statement()
            .where(col(PaymentIntent.status).in_(IN_FLIGHT))
            .where(col(PaymentIntent.valid_before) < cutoff_unix)
            .order_by(col(PaymentIntent.valid_before))
            .limit(limit)
        )

    def settlement_due(
        self,
        *,
        networks: Collection[str],
        never_sent: Collection[str],
        mismatch_prefix: str,
        limit: int,
    ) -> Sequence[PaymentIntent]:
        """Intents whose money may still move: in flight, or failed or expired after being sent,
        until the chain settles them or proves they cannot settle (`lapse_block`)."""
        sent_and_unfinished = or_(
            col(PaymentIntent.status).in_(IN_FLIGHT),
            and_(
                col(PaymentIntent.status).in_(COUNTED_UNTIL_LAPSED),
                col(PaymentIntent.authorized_at).is_not(None),
                col(PaymentIntent.lapse_block).is_(None),
                ~_never_left(never_sent),
            ),
        )
        return self._all(
            self._statement()
            .where(col(PaymentIntent.network).in_(networks))
            .where(sent_and_unfinished)
            .where(
                or_(
                    col(PaymentIntent.failure_code).is_(None),
                    ~col(PaymentIntent.failure_code).startswith(mismatch_prefix),
                )
            )
            .order_by(col(PaymentIntent.valid_before).desc())
            .limit(limit)
        )

    def open_from_payer(
        self, *, payer: str, network: str, now_unix: int, never_sent: Collection[str], mismatch_prefix: str
    ) -> Sequence[PaymentIntent]:
        """Intents paying from `payer` on `network`, in any organisation, whose money may still move:
        authorised and still signable, in flight, or failed or expired after being sent, until the
        chain settles them or proves they cannot settle (`lapse_block`)."""
        may_still_move = or_(
            and_(
                col(PaymentIntent.status) == IntentStatus.AUTHORIZED,
                col(PaymentIntent.valid_before) > now_unix,
            ),
            and_(col(PaymentIntent.status).in_(IN_FLIGHT), col(PaymentIntent.lapse_block).is_(None)),
            and_(
                col(PaymentIntent.status).in_(COUNTED_UNTIL_LAPSED),
                col(PaymentIntent.authorized_at).is_not(None),
                col(PaymentIntent.lapse_block).is_(None),
                ~_never_left(never_sent),
                or_(
                    col(PaymentIntent.failure_code).is_(None),
                    ~col(PaymentIntent.failure_code).startswith(mismatch_prefix),
                ),
            ),
        )
        return self._all(
            self._statement()
            .where(func.lower(PaymentIntent.payer) == payer.lower(), PaymentIntent.network == network)
            .where(may_still_move)
            .order_by(col(PaymentIntent.valid_before))
        )


# `FindingRepository.recent`'s statement of ids, per shape of reader, built once and kept.
_RECENT_FINDINGS: dict[ReaderShape, Any] = {}


def _recent_findings_statement(shape: ReaderShape) -> Any:
    table = OutOfPolicyFinding.__table__  # type: ignore[attr-defined]
    statement = (
        select(table.c.id)
        .where(table.c.agent_id == bindparam("agent"), table.c.detected_at >= bindparam("since"))
        .order_by(table.c.detected_at.desc())
        .limit(bindparam("limit"))
    )
    return scoped(statement, shape, table.c.org_id, table.c.agent_id)


class FindingRepository(TenantRepository[OutOfPolicyFinding]):
    model = OutOfPolicyFinding
    agent_column = "agent_id"

    def insert_once(self, finding: OutOfPolicyFinding) -> bool:
        """Add the finding unless one for the same agent and token log exists (any process)."""
        exists = self.session.exec(
            select(OutOfPolicyFinding.id).where(
                OutOfPolicyFinding.agent_id == finding.agent_id,
                OutOfPolicyFinding.network == finding.network,
                OutOfPolicyFinding.tx_hash == finding.tx_hash,
                OutOfPolicyFinding.log_index == finding.log_index,
            )
        ).first()
        if exists is not None:
            return False
        try:
            with self.session.begin_nested():
                self.session.add(finding)
        except IntegrityError:
            return False  # another process recorded it in the meantime
        return True

    def recent(
        self, reader: Reader, *, agent_id: str, since: datetime, limit: int
    ) -> Sequence[OutOfPolicyFinding]:
        """The agent's findings since `since`, newest first. Their ids come from a kept statement
        with its values bound; rows are loaded only when there are some (rarely: each is money that
        left the wallet outside any payment)."""
        shape = reader_shape(reader)
        statement = _RECENT_FINDINGS.get(shape)
        if statement is None:
            statement = _RECENT_FINDINGS[shape] = _recent_findings_statement(shape)
        params = {"agent": agent_id, "since": since, "limit": limit, **scope_params(reader, shape)}
        ids = list(self.session.connection().execute(statement, params).scalars())
        if not ids:
            return []
        return self._all(
            self.readable(reader)
            .where(col(OutOfPolicyFinding.id).in_(ids))
            .order_by(col(OutOfPolicyFinding.detected_at).desc(), col(OutOfPolicyFinding.id))
        )


@dataclass(frozen=True)
class WalletOwner:
    address: str  # lower-case
    org_id: str
    agent_id: str
    since: datetime  # when this agent's wallet with this address was created


class WatchRepository(Repository[ChainScanCursor]):
    """What the out-of-policy watch reads: active wallets and its own cursors."""

    model = ChainScanCursor

    def active_wallet_owners(self) -> list[WalletOwner]:
        rows = self.session.exec(
            select(Wallet, Agent)
            .join(Agent, col(Agent.id) == col(Wallet.agent_id))
            .where(col(Wallet.retired_at).is_(None))
        ).all()
        return [
            WalletOwner(wallet.address.lower(), agent.org_id, agent.id, wallet.created_at)
            for wallet, agent in rows
        ]

    def cursor(self, *, network: str, asset: str, address: str) -> ChainScanCursor | None:
        return self.session.get(ChainScanCursor, (network, asset.lower(), address))


# The seller circuit breaker's outcomes: paid, or possibly paid, and nothing usable delivered.
UNDELIVERED_CODES = (
    "payment_rejected_by_seller",
    "payment_not_completed",
    "payment_outcome_unknown",
    "payment_identifier_conflict",
    "not_settled_before_valid_before",  # an outcome never known, and the chain shows it never settled
)


def _undelivered() -> Any:
    """A payment Paywarden sent that came back with nothing: failed with one of `UNDELIVERED_CODES`,
    or served with an empty body or an error status. A payment the agent sent itself (pay_x402)
    never counts: what the seller answered it is the agent's to know, not Paywarden's."""
    return and_(
        col(PaymentIntent.sent_by) == PaymentSender.PAYWARDEN,
        or_(
            and_(
                col(PaymentIntent.status).in_(COUNTED_UNTIL_LAPSED),
                col(PaymentIntent.failure_code).in_(UNDELIVERED_CODES),
            ),
            and_(
                col(PaymentIntent.status).in_(SERVED),
                or_(col(PaymentIntent.body_bytes) == 0, col(PaymentIntent.seller_status) >= 400),
            ),
        ),
    )


class CircuitRepository(Repository[SellerCircuit]):
    """The hosts an organisation has blocked, and the count that opens a circuit."""

    model = SellerCircuit

    def undelivered_count(self, *, org_id: str, host: str, since: datetime) -> int:
        """How many of the organisation's payments to `host` ended undelivered since `since`."""
        return int(
            self.session.exec(
                select(func.count())
                .select_from(PaymentIntent)
                .where(PaymentIntent.org_id == org_id, PaymentIntent.host == host)
                # At the time of the outcome (the seller's answer), not of a later change such as
                # the chain settling it: a failure from before a clearing never counts again.
                .where(func.coalesce(PaymentIntent.completed_at, PaymentIntent.updated_at) >= since)
                .where(_undelivered())
            ).one()
        )

    def last_cleared(self, *, org_id: str, host: str) -> datetime | None:
        return self.session.exec(
            select(func.max(SellerCircuit.cleared_at)).where(
                SellerCircuit.org_id == org_id, SellerCircuit.host == host
            )
        ).one()

    def open_for(self, *, org_id: str, host: str, now: datetime) -> SellerCircuit | None:
        return self.session.exec(
            select(SellerCircuit)
            .where(SellerCircuit.org_id == org_id, SellerCircuit.host == host)
            .where(col(SellerCircuit.cleared_at).is_(None), col(SellerCircuit.open_until) > now)
            .order_by(col(SellerCircuit.opened_at).desc())
        ).first()

    def open_in(self, *, org_id: str, now: datetime) -> list[SellerCircuit]:
        return list(
            self.session.exec(
                select(SellerCircuit)
                .where(SellerCircuit.org_id == org_id)
                .where(col(SellerCircuit.cleared_at).is_(None), col(SellerCircuit.open_until) > now)
                .order_by(col(SellerCircuit.host))
            )
        )

    def thresholds(self, *, org_id: str) -> tuple[int, int]:
        """The organisation's (failures, window in hours) that open a circuit."""
        failures, hours = self.session.exec(
            select(Organization.circuit_failures, Organization.circuit_window_hours).where(
                Organization.id == org_id
            )
        ).one()
        return int(failures), int(hours)


class SweepRepository(TenantRepository[WalletSweep]):
    """Sweeps of retired wallets: at most one open per wallet and network (`open_slot`)."""

    model = WalletSweep
    agent_column: ClassVar[str | None] = "agent_id"

    def open_in(self, reader: Reader, *, slot: str) -> WalletSweep | None:
        return self._first(self.readable(reader).where(WalletSweep.open_slot == slot))

    def of_agent(self, reader: Reader, *, agent_id: str, limit: int) -> Sequence[WalletSweep]:
        """The agent's sweeps, newest first."""
        return self._all(
            self.readable(reader)
            .where(WalletSweep.agent_id == agent_id)
            .order_by(col(WalletSweep.created_at).desc(), col(WalletSweep.id).desc())
            .limit(limit)
        )
