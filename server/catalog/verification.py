"""Verify catalog sellers without paying: request each example URL once, read the 402, record it.

The request goes through the safe seller client, exactly as fetch_paid's first request does
(same-origin redirects, private addresses blocked, one deadline), and the 402 is read the same
way (x402 v2 header, or a v1 body). Nothing is ever signed. A check records, per network, the
cheapest offer Paywarden could pay (exact USDC, a whole amount) and its payee, whether the 402
reads like instructions to an agent, and `verified_at`. A check that fails records why in
`check_error` and leaves `verified_at` alone, so the seller drops out of search once its last
good check is 24 hours old.

A pinned seller that asks to be paid at an address it has not pinned is suspended at once
(`payee_changed`): it is no longer listed, so no agent's catalog rules accept it, until an
operator pins the new payee and resumes it.

`CatalogVerificationJob` is the periodic pass: under the job runner's lease (one process at a
time), it checks the entries whose last check is older than `RECHECK_AFTER`, a batch per pass.
Every write re-reads the entry, so a check racing an operator's command or another process never
resurrects a row's old state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

import anyio
from sqlmodel import Session

from server.catalog.repository import CatalogRepository
from server.kit.clock import Clock
from server.kit.db import Database
from server.kit.errors import PaywardenError
from server.models import CatalogEntry, CatalogOffer
from server.sellers.client import SellerClient, SellerRequest, SellerResponse
from server.vocabulary import PayToMode, SuspensionReason
from server.x402.challenge import Challenge, ChallengeError, decode_challenge, host_of
from server.x402.headers import PAYMENT_REQUIRED
from server.x402.instructions import challenge_reads_like_instructions
from server.x402.selection import Selection, payable_offers

log = logging.getLogger("paywarden.catalog")

RECHECK_AFTER = timedelta(hours=6)
JOB_INTERVAL_SECONDS = 600.0
JOB_BATCH = 50


class CheckError(StrEnum):
    """Why a check did not verify a seller."""

    SELLER_UNREACHABLE = "seller_unreachable"
    SELLER_TIMEOUT = "seller_timeout"
    PRIVATE_ADDRESS_BLOCKED = "private_address_blocked"
    INVALID_URL = "invalid_input"
    NOT_PAYMENT_REQUIRED = "not_payment_required"  # the URL did not answer 402
    INVALID_PAYMENT_REQUIRED = "invalid_payment_required"
    NO_PAYABLE_ENTRY = "no_payable_entry"
    RESOURCE_MISMATCH = "resource_mismatch"
    PAYEE_CHANGED = "payee_changed"


class CheckOutcome(StrEnum):
    VERIFIED = "verified"
    FAILED = "failed"
    SUSPENDED = "suspended"  # a pinned seller asked for a payee it has not pinned


@dataclass(frozen=True)
class Observation:
    """What one unpaid request to a seller's example URL showed."""

    error: CheckError | None
    http_status: int | None = None
    offers: tuple[Selection, ...] = ()  # the cheapest payable offer per network
    instruction_like: bool = False

    @property
    def payees(self) -> frozenset[str]:
        return frozenset(offer.pay_to.lower() for offer in self.offers)


@dataclass(frozen=True)
class CheckResult:
    entry_id: str
    host: str
    outcome: CheckOutcome
    error: CheckError | None
    checked_at: datetime
    offers: tuple[CatalogOffer, ...] = ()
    payees: tuple[str, ...] = ()
    new_payees: tuple[str, ...] = field(default=())  # for a suspension: the payees not pinned


def cheapest_per_network(offers: Sequence[Selection]) -> tuple[Selection, ...]:
    best: dict[str, Selection] = {}
    for offer in offers:
        current = best.get(offer.network)
        if current is None or offer.amount_atomic < current.amount_atomic:
            best[offer.network] = offer
    return tuple(best[network] for network in sorted(best))


def read_observation(
    response: SellerResponse, *, host: str, usdc_by_network: Mapping[str, str]
) -> Observation:
    """Judge a seller's answer to the unpaid example request."""
    if response.status != 402 or response.redirect_not_followed:
        return Observation(CheckError.NOT_PAYMENT_REQUIRED, response.status)
    try:
        challenge: Challenge = decode_challenge(response.headers.get(PAYMENT_REQUIRED), response.body)
    except ChallengeError:
        return Observation(CheckError.INVALID_PAYMENT_REQUIRED, response.status)
    payable = payable_offers(challenge, usdc_by_network=usdc_by_network)
    if not payable:
        return Observation(CheckError.NO_PAYABLE_ENTRY, response.status)
    named = {host_of(offer.offer.resource_url or challenge.resource_url) for offer in payable}
    if named - {None, host}:
        return Observation(CheckError.RESOURCE_MISMATCH, response.status)
    instruction_like = challenge_reads_like_instructions(
        challenge.seller_texts(), response.body, response.content_type
    )
    return Observation(None, response.status, cheapest_per_network(payable), instruction_like)


def record_check(
    repository: CatalogRepository, entry: CatalogEntry, seen: Observation, now: datetime
) -> CheckResult:
    """Write what a check saw on `entry`, which the caller re-read in this transaction."""
    entry.checked_at = now
    if seen.error is not None:
        entry.check_error = str(seen.error)
        repository.session.add(entry)
        return CheckResult(entry.id, entry.host, CheckOutcome.FAILED, seen.error, now)

    payees = sorted(seen.payees)
    entry.observed_pay_to = payees
    new_payees = sorted(set(payees) - set(entry.pinned_pay_to))
    if entry.accepted_at is not None and entry.pay_to_mode == PayToMode.PINNED and new_payees:
        entry.check_error = str(CheckError.PAYEE_CHANGED)
        if entry.suspended_at is None:
            entry.suspended_at = now
            entry.suspension_reason = SuspensionReason.PAYEE_CHANGED
        repository.session.add(entry)
        log.warning(
            "catalog seller %s suspended: it asked to be paid at an address it had not pinned", entry.host
        )
        return CheckResult(
            entry.id,
            entry.host,
            CheckOutcome.SUSPENDED,
            CheckError.PAYEE_CHANGED,
            now,
            payees=tuple(payees),
            new_payees=tuple(new_payees),
        )

    offers = [
        CatalogOffer(
            entry_id=entry.id, network=offer.network, amount_atomic=offer.amount_atomic, pay_to=offer.pay_to
        )
        for offer in seen.offers
    ]
    repository.replace_offers(entry.id, offers)
    entry.verified_at = now
    entry.check_error = None
    entry.instruction_like = seen.instruction_like
    repository.session.add(entry)
    return CheckResult(
        entry.id,
        entry.host,
        CheckOutcome.VERIFIED,
        None,
        now,
        offers=tuple(offers),
        payees=tuple(payees),
    )


class CatalogVerifier:
    """Checks sellers' example URLs through the safe client and records what it saw."""

    def __init__(
        self,
        *,
        db: Database,
        sellers: SellerClient,
        usdc_by_network: Mapping[str, str],
        timeout_ms: int,
        clock: Clock,
    ) -> None:
        self._db = db
        self._sellers = sellers
        self._usdc = dict(usdc_by_network)
        self._timeout_s = timeout_ms / 1000
        self._clock = clock

    async def observe(self, entry: CatalogEntry) -> Observation:
        """One unpaid request to the entry's example URL; never raises for what the seller does."""
        headers = {"Content-Type": "application/json"} if entry.example_body else {}
        body = entry.example_body.encode() if entry.example_body else None
        request = SellerRequest(entry.method, entry.url, headers, body)
        deadline = anyio.current_time() + self._timeout_s
        try:
            response = await self._sellers.fetch(request, deadline=deadline)
        except PaywardenError as exc:
            error = {
                "seller_unreachable": CheckError.SELLER_UNREACHABLE,
                "seller_timeout": CheckError.SELLER_TIMEOUT,
                "private_address_blocked": CheckError.PRIVATE_ADDRESS_BLOCKED,
            }.get(exc.code, CheckError.INVALID_URL)
            return Observation(error)
        return read_observation(response, host=entry.host, usdc_by_network=self._usdc)

    def _entry(self, session: Session, entry_id: str) -> CatalogEntry | None:
        return CatalogRepository(session).by_id(entry_id)

    def _record(self, session: Session, entry_id: str, seen: Observation) -> CheckResult | None:
        repository = CatalogRepository(session)
        entry = repository.by_id(entry_id)
        if entry is None:
            return None  # removed while it was being checked
        repository.refresh(entry)
        return record_check(repository, entry, seen, self._clock.now())

    async def verify(self, entry_ids: Sequence[str]) -> list[CheckResult]:
        results: list[CheckResult] = []
        for entry_id in entry_ids:
            entry = await self._db.reading(self._entry, entry_id)
            if entry is None:
                continue
            seen = await self.observe(entry)
            result = await self._db.writing(self._record, entry_id, seen)
            if result is not None:
                results.append(result)
        return results

    def _due(self, session: Session, limit: int) -> list[str]:
        return CatalogRepository(session).due_for_check(
            checked_before=self._clock.now() - RECHECK_AFTER, limit=limit
        )

    async def verify_due(self, *, limit: int = JOB_BATCH) -> list[CheckResult]:
        return await self.verify(await self._db.reading(self._due, limit))

    def _all(self, session: Session, include_suspended: bool) -> list[str]:
        return CatalogRepository(session).ids(include_suspended=include_suspended)

    async def verify_all(self, *, include_suspended: bool = True) -> list[CheckResult]:
        return await self.verify(await self._db.reading(self._all, include_suspended))


class CatalogVerificationJob:
    """Background job: re-check the sellers whose last check is older than RECHECK_AFTER."""

    name = "catalog.verify"
    interval_seconds = JOB_INTERVAL_SECONDS

    def __init__(self, verifier: CatalogVerifier) -> None:
        self._verifier = verifier

    async def run_once(self) -> int:
        return len(await self._verifier.verify_due())
