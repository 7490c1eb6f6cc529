"""Verifying catalog sellers without paying, against real sellers on loopback: the x402 SDK's seller
records its true prices and payee; a pinned seller that changes its payee is suspended at once;
every way a seller can fail a check is recorded, with the last good verification kept; the
periodic job checks what is due, in one process at a time; no check ever sends a payment."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest

from server.catalog.service import add_entry, find_entry, find_listed, listing, listing_for
from server.catalog.verification import CatalogVerificationJob, CatalogVerifier, CheckError, CheckOutcome
from server.jobs.runner import JobRunner
from server.kit.clock import FrozenClock
from server.kit.db import Database
from server.models import CatalogEntry
from server.sellers.client import SellerClient
from server.vocabulary import PayToMode, SuspensionReason
from tests.support.chain import TestToken, free_port
from tests.support.cli import run_cli
from tests.support.clocks import frozen_clock, written
from tests.support.crafted_seller import CraftedSeller, fixture_crafted_seller  # noqa: F401
from tests.support.hostile_seller import PRICE, HostileSeller, fixture_hostile_seller  # noqa: F401
from tests.support.seller import Seller

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

NETWORK = "eip155:84532"
START = written(2026, 11, 30, 12, 0)


def verifier(db: Database, token: TestToken, clock: FrozenClock | None = None) -> CatalogVerifier:
    return CatalogVerifier(
        db=db,
        sellers=SellerClient(max_response_bytes=1_048_576, allow_private_hosts=True),
        usdc_by_network={NETWORK: token.address},
        timeout_ms=3000,
        clock=clock or frozen_clock(START),
    )


def add(
    db: Database,
    url: str,
    *,
    pay_to: list[str] | None = None,
    price: str = "0.99",
    network: str = "eip155:8453",
) -> str:
    with db.write() as session:
        return add_entry(
            session,
            name="Seller under test",
            host=urlsplit(url).hostname or "",
            url=url,
            price_usd=Decimal(price),
            network=network,
            category="testing",
            pay_to=pay_to or [],
            actor="test",
            now=START,
        ).id


def entry(db: Database, entry_id: str) -> CatalogEntry:
    with db.read() as session:
        return find_entry(session, entry_id)


async def test_verification_records_the_sellers_true_prices_and_payee_without_paying(
    db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    entry_id = add(db, seller.url("/report"))  # declared at 0.99 on Base: wrong on both counts
    before = seller.payment_signature_counts

    (result,) = await verifier(db, test_usdc).verify([entry_id])

    assert (result.outcome, result.error) == (CheckOutcome.VERIFIED, None)
    checked = entry(db, entry_id)
    assert checked.verified_at == START
    assert checked.checked_at == START
    assert checked.check_error is None
    assert checked.observed_pay_to == [seller.pay_to.lower()]
    assert checked.instruction_like is False
    with db.read() as session:
        offers = listing(session, checked).offers
    assert [(o.network, o.amount_atomic, o.pay_to) for o in offers] == [(NETWORK, 500_000, seller.pay_to)]
    assert seller.payment_signature_counts == before  # nothing was ever paid


async def test_a_pinned_seller_whose_payee_changes_is_suspended(
    db: Database, crafted_seller: CraftedSeller, test_usdc: TestToken
) -> None:
    url = crafted_seller.url(crafted_seller.path("moving"))
    pinned = add(db, url, pay_to=[crafted_seller.pay_to])
    clock = frozen_clock(START)
    checks = verifier(db, test_usdc, clock)
    try:
        assert (await checks.verify([pinned]))[0].outcome == CheckOutcome.VERIFIED
        with db.read() as session:
            assert listing_for(session, "127.0.0.1") is not None
        crafted_seller.pay_to_now = crafted_seller.other_pay_to
        clock.advance(3600)

        (result,) = await checks.verify([pinned])

        assert (result.outcome, result.error) == (CheckOutcome.SUSPENDED, CheckError.PAYEE_CHANGED)
        assert result.new_payees == (crafted_seller.other_pay_to.lower(),)
        suspended = entry(db, pinned)
        assert (suspended.suspended_at, suspended.suspension_reason) == (
            clock.now(),
            SuspensionReason.PAYEE_CHANGED,
        )
        assert suspended.verified_at == START  # the last good check, not this one
        with db.read() as session:
            # No longer listed: no agent's catalog rules accept it, and search never shows it.
            assert find_listed(session, "127.0.0.1") is None
            assert listing_for(session, "127.0.0.1") is None
            offers = listing(session, suspended).offers
        assert [o.pay_to for o in offers] == [crafted_seller.pay_to]

        # An operator pins the new payee and resumes it; the next check passes.
        assert (
            run_cli(
                db.url, "admin", "catalog", "edit", pinned, "--pay-to", crafted_seller.other_pay_to
            ).exit_code
            == 0
        )
        resumed = run_cli(db.url, "admin", "catalog", "resume", pinned, "--json").json()
        assert (resumed["status"], resumed["payTo"]) == ("listed", [crafted_seller.other_pay_to.lower()])
        assert (await checks.verify([pinned]))[0].outcome == CheckOutcome.VERIFIED
    finally:
        crafted_seller.pay_to_now = crafted_seller.pay_to


async def test_a_rotating_seller_may_change_its_payee(
    db: Database, crafted_seller: CraftedSeller, test_usdc: TestToken
) -> None:
    rotating = add(db, crafted_seller.url(crafted_seller.path("moving")))
    checks = verifier(db, test_usdc)
    try:
        await checks.verify([rotating])
        crafted_seller.pay_to_now = crafted_seller.other_pay_to
        (result,) = await checks.verify([rotating])
    finally:
        crafted_seller.pay_to_now = crafted_seller.pay_to
    assert result.outcome == CheckOutcome.VERIFIED
    after = entry(db, rotating)
    assert (after.pay_to_mode, after.suspended_at) == (PayToMode.ROTATING, None)
    assert after.observed_pay_to == [crafted_seller.other_pay_to.lower()]


@pytest.mark.parametrize(
    ("scenario", "error"),
    [
        ("no_challenge", CheckError.INVALID_PAYMENT_REQUIRED),
        ("unpayable", CheckError.NO_PAYABLE_ENTRY),
        ("wrong_asset", CheckError.NO_PAYABLE_ENTRY),
        ("other_host", CheckError.RESOURCE_MISMATCH),
        ("ok", CheckError.NOT_PAYMENT_REQUIRED),
        ("redirect_away", CheckError.NOT_PAYMENT_REQUIRED),
    ],
)
async def test_a_failed_check_records_why_and_keeps_the_last_good_one(
    db: Database, hostile_seller: HostileSeller, test_usdc: TestToken, scenario: str, error: CheckError
) -> None:
    path = hostile_seller.path(scenario)
    entry_id = add(db, hostile_seller.url(path))
    with db.write() as session:
        find_entry(session, entry_id).verified_at = written(2026, 11, 30, 1, 0)

    (result,) = await verifier(db, test_usdc).verify([entry_id])

    assert (result.outcome, result.error) == (CheckOutcome.FAILED, error)
    failed = entry(db, entry_id)
    assert (failed.check_error, failed.checked_at) == (str(error), START)
    assert failed.verified_at == written(2026, 11, 30, 1, 0)
    assert failed.suspended_at is None
    assert hostile_seller.signatures(path) == 0


async def test_an_unreachable_seller_and_instruction_like_text_are_recorded(
    db: Database, hostile_seller: HostileSeller, test_usdc: TestToken
) -> None:
    unreachable = add(db, f"http://localhost:{free_port()}/gone")
    injecting = add(db, hostile_seller.url(hostile_seller.path("inject")), pay_to=[hostile_seller.pay_to])
    gone, inject = await verifier(db, test_usdc).verify([unreachable, injecting])
    assert (gone.outcome, gone.error) == (CheckOutcome.FAILED, CheckError.SELLER_UNREACHABLE)
    assert (inject.outcome, inject.error) == (CheckOutcome.VERIFIED, None)
    assert entry(db, injecting).instruction_like is True
    assert [(o.amount_atomic, o.pay_to) for o in inject.offers] == [(PRICE, hostile_seller.pay_to)]


async def test_the_job_checks_what_is_due_in_one_process_at_a_time(
    db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    entry_id = add(db, seller.url("/premium"))
    clock = frozen_clock(START)
    job = CatalogVerificationJob(verifier(db, test_usdc, clock))
    first, second = JobRunner(db=db, clock=clock, jobs=[job]), JobRunner(db=db, clock=clock, jobs=[job])
    passes: list[int | None] = []

    async def run(runner: JobRunner) -> None:
        passes.append(await runner.run_due(job))

    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            group.start_soon(run, first)
            group.start_soon(run, second)
    assert sorted(passes, key=lambda p: p is None) == [1, None]  # one checked it; the other held no lease
    assert entry(db, entry_id).verified_at == START

    clock.advance(3600)  # checked an hour ago: not due
    assert await job.run_once() == 0
    clock.advance(6 * 3600)  # seven hours: due again
    assert await job.run_once() == 1
    assert entry(db, entry_id).verified_at == clock.now()


def test_the_verify_command_checks_chosen_due_or_all_entries(
    db: Database, seller: Seller, test_usdc: TestToken
) -> None:
    env = {"PAYWARDEN_ALLOW_PRIVATE_HOSTS": "1", "PAYWARDEN_ASSETS": json.dumps({NETWORK: test_usdc.address})}
    entry_id = add(db, seller.url("/premium"))
    chosen = run_cli(db.url, "admin", "catalog", "verify", "127.0.0.1", "--json", env=env).json()
    assert chosen["checked"] == 1
    (result,) = chosen["results"]
    assert (result["id"], result["outcome"], result["payees"]) == (
        entry_id,
        "verified",
        [seller.pay_to.lower()],
    )
    assert result["offers"] == [{"network": NETWORK, "priceUsd": "0.01", "payTo": seller.pay_to}]
    # Just checked (by the wall clock), so nothing is due; --all checks it anyway.
    assert run_cli(db.url, "admin", "catalog", "verify", "--json", env=env).json()["checked"] == 0
    assert run_cli(db.url, "admin", "catalog", "verify", "--all", "--json", env=env).json()["checked"] == 1
    shown: dict[str, Any] = run_cli(db.url, "admin", "catalog", "show", entry_id, "--json").json()
    assert (shown["priceUsd"], shown["network"], shown["checkError"]) == ("0.01", NETWORK, None)
