"""A held payment offered to the person through the MCP client, with the official SDK client over
HTTP against a real server paying on anvil:

- protocol 2025-11-25 on a stateful session, the client declaring URL elicitation: one
  `elicitation/create` (URL mode, the approval URL, our fixed words), then the same call waits and
  pays once another process approved; a denial ends it in `approval_denied`; no decision in time
  returns `pending_approval`;
- protocol 2026-07-28: `input_required` with the URL request and a sealed `requestState`; the
  retry continues the same purchase; other arguments, or a forged, expired or foreign state,
  are refused with stable reasons;
- a client that cannot elicit gets `pending_approval` with the link, polls and retries.

The person's decision is `decide` (tests/support/elicitation.py): another process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp_types import CallToolResult, ElicitRequest, ElicitRequestURLParams, ElicitResult, InputRequiredResult

from server.kit.db import Database
from server.mcp.held_payments import PROMPT_MESSAGE
from tests.support.chain import TestToken
from tests.support.clocks import ShiftedClock
from tests.support.elicitation import (
    LEGACY,
    MODERN,
    RawSession,
    UrlElicitations,
    approval_id_of,
    call_while_deciding,
    decide,
    eliciting_client,
)
from tests.support.fixtures_chain import FundedWallet
from tests.support.handover import challenge_of, pay_args, send
from tests.support.paywarden import RunningServer, chain_environ, error_of, serve, structured
from tests.support.seller import Seller
from tests.support.tenants import AgentSetup, make_agent, make_member

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

PREMIUM = 10_000  # 0.01 USDC


# Long enough for a decision made by a command-line process on a loaded machine; a call that is
# woken by the decision never waits it out.
SHARED_WAIT_MS = 60_000
_shared: dict[str, RunningServer] = {}


# Each test makes its own organisation, agent and approver: the tests that wait the usual 60 s
# on the real clock share one server per module and database kind (docs/development.md,
# "Sharing a server"); a test with another wait or a frozen clock still starts its own.
@pytest.fixture(name="db")
def fixture_db(module_db: Database) -> Database:
    return module_db


@pytest.fixture(scope="module", autouse=True)
def waiting_server(module_db: Database, anvil: Any, test_usdc: TestToken) -> Iterator[RunningServer]:
    with _serve(module_db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS, clock=None) as server:
        _shared[module_db.url] = server
        try:
            yield server
        finally:
            del _shared[module_db.url]


def _serve(db: Database, anvil: Any, test_usdc: TestToken, *, wait_ms: int, clock: Any) -> RunningServer:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": str(wait_ms),
    }
    return serve(db.url, extra=extra, clock=clock)


def _server(
    db: Database, anvil: Any, test_usdc: TestToken, *, wait_ms: int, clock: Any = None
) -> AbstractContextManager[RunningServer]:
    if wait_ms == SHARED_WAIT_MS and clock is None:
        return nullcontext(_shared[db.url])
    return _serve(db, anvil, test_usdc, wait_ms=wait_ms, clock=clock)


def _agent(db: Database, server: RunningServer, wallet: FundedWallet) -> tuple[AgentSetup, str]:
    """An agent whose first payment to the seller is held (a new payee), and an approver."""
    setup = make_agent(db, server.settings, allow_hosts=["127.0.0.1"], wallet_key=wallet.private_key)
    return setup, make_member(db, setup.org_id, role="approver")


async def _call_and_decide(
    client: Client,
    arguments: dict[str, Any],
    elicitations: UrlElicitations,
    *,
    database_url: str,
    member: str,
    approve: bool,
) -> CallToolResult:
    """Call fetch_paid; once the client was asked, a person decides from another process while
    the call waits."""

    async def by_command_line(request: ElicitRequestURLParams) -> object:
        return await decide(database_url, approval_id_of(request), member=member, approve=approve)

    return await call_while_deciding(client, arguments, elicitations, by_command_line)


# -- protocol 2025-11-25, stateful session ---------------------------------------------------


async def test_an_elicited_approval_lets_the_same_call_pay(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        before = test_usdc.balance_of(seller.pay_to)
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            assert client.protocol_version == "2025-11-25"
            started = time.monotonic()
            result = await _call_and_decide(
                client,
                {"url": seller.url("/premium")},
                elicitations,
                database_url=db.url,
                member=member,
                approve=True,
            )
            waited = time.monotonic() - started
        paid = structured(result)
        assert paid["status"] == "paid"
        assert paid["receipt"]["state"] == "settled"
        assert paid["receipt"]["txHash"].startswith("0x")
        assert test_usdc.balance_of(seller.pay_to) - before == PREMIUM
        request = elicitations.only()
        assert request.mode == "url"
        assert request.message == PROMPT_MESSAGE
        assert request.url.startswith(f"{server.settings.public_url}/approvals/apr_")
        assert request.elicitation_id
        assert (
            waited < SHARED_WAIT_MS / 1000
        )  # woken by the poll, before the limit (which would answer pending)
        assert elicitations.completed == [request.elicitation_id]


async def test_an_elicited_denial_ends_the_call_in_approval_denied(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        before = test_usdc.balance_of(seller.pay_to)
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            result = await _call_and_decide(
                client,
                {"url": seller.url("/premium")},
                elicitations,
                database_url=db.url,
                member=member,
                approve=False,
            )
        assert error_of(result)["code"] == "approval_denied"
        assert test_usdc.balance_of(seller.pay_to) == before
        assert elicitations.completed == [elicitations.only().elicitation_id]


async def test_an_approval_that_expires_while_the_call_waits_ends_it_in_approval_expired(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    clock = ShiftedClock()
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS, clock=clock) as server:
        setup, _member = _agent(db, server, funded_wallet)
        before = test_usdc.balance_of(seller.pay_to)
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            result: list[CallToolResult] = []

            async def call() -> None:
                result.append(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))

            started = time.monotonic()
            async with anyio.create_task_group() as group:
                group.start_soon(call)
                with anyio.fail_after(20):
                    await elicitations.asked.wait()
                clock.advance(15 * 60 + 1)  # the organisation's TTL runs out while the call waits
        assert error_of(result[0])["code"] == "approval_expired"
        assert elicitations.completed == [elicitations.only().elicitation_id]
        assert time.monotonic() - started < 10
        assert test_usdc.balance_of(seller.pay_to) == before


async def test_no_decision_in_time_returns_pending_approval(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=300) as server:
        setup, _member = _agent(db, server, funded_wallet)
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            held = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            # Asked once per call: the retry asks again, once.
            again = structured(
                await client.call_tool(
                    "fetch_paid", {"url": seller.url("/premium"), "idempotencyKey": held["idempotencyKey"]}
                )
            )
        assert held["status"] == "pending_approval"
        assert held["approvalPrompt"] == "accepted"
        assert held["approvalUrl"] == elicitations.requests[0].url  # type: ignore[union-attr]
        assert "plain link" in held["next"]
        assert (again["approvalId"], again["approvalPrompt"]) == (held["approvalId"], "accepted")
        assert len(elicitations.requests) == 2
        assert elicitations.completed == []  # still undecided: the page is not done


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_prompt_is_not_a_denial(
    action: str, db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        elicitations = UrlElicitations(action)  # type: ignore[arg-type]
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:
            started = time.monotonic()
            held = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert time.monotonic() - started < 10  # nobody waits for a page the person will not open
            answer = {"decline": "declined", "cancel": "cancelled"}[action]
            assert (held["status"], held["approvalPrompt"]) == ("pending_approval", answer)
            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]})
            )
            assert status["status"] == "pending"
            await decide(db.url, held["approvalId"], member=member, approve=True)
            retry = {"url": seller.url("/premium"), "idempotencyKey": held["idempotencyKey"]}
            assert structured(await client.call_tool("fetch_paid", retry))["status"] == "paid"


# -- a client that cannot elicit --------------------------------------------------------------


@pytest.mark.parametrize("mode", [LEGACY, MODERN])
async def test_a_client_without_elicitation_gets_the_link_polls_and_retries(
    mode: str, db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        async with eliciting_client(server.mcp_url, setup.token, mode=mode, elicitations=None) as client:
            started = time.monotonic()
            held = structured(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))
            assert time.monotonic() - started < 10
            assert held["status"] == "pending_approval"
            assert held["approvalPrompt"] == "not_supported"
            assert held["approvalUrl"] == f"{server.settings.public_url}/approvals/{held['approvalId']}"
            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]})
            )
            assert status["status"] == "pending"
            await decide(db.url, held["approvalId"], member=member, approve=True)
            status = structured(
                await client.call_tool("get_approval_status", {"approvalId": held["approvalId"]})
            )
            assert status["status"] == "approved"
            retry = {"url": seller.url("/premium"), "idempotencyKey": held["idempotencyKey"]}
            paid = structured(await client.call_tool("fetch_paid", retry))
        assert (paid["status"], paid["receipt"]["state"]) == ("paid", "settled")


@pytest.mark.parametrize("elicitation", [{"form": {}}, {}], ids=["form mode", "empty (form)"])
async def test_a_client_declaring_only_form_elicitation_gets_the_link(
    elicitation: dict[str, Any],
    db: Database,
    anvil: Any,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, _member = _agent(db, server, funded_wallet)
        async with httpx.AsyncClient(timeout=30) as http:
            session = RawSession(http, server.mcp_url, setup.token)
            await session.initialize({"elicitation": elicitation})
            result = await session.call_tool("fetch_paid", {"url": seller.url("/premium")})
        held = result["structuredContent"]
        assert (held["status"], held["approvalPrompt"]) == ("pending_approval", "not_supported")
        assert held["approvalUrl"].endswith(f"/approvals/{held['approvalId']}")


# -- protocol 2026-07-28: input_required and a sealed requestState ----------------------------


def _input_required(result: CallToolResult | InputRequiredResult) -> tuple[ElicitRequestURLParams, str]:
    assert isinstance(result, InputRequiredResult), result
    assert result.input_requests is not None
    assert result.request_state is not None
    (ask,) = result.input_requests.values()
    assert isinstance(ask, ElicitRequest)
    assert isinstance(ask.params, ElicitRequestURLParams)
    return ask.params, result.request_state


async def test_modern_input_required_then_the_retry_continues_the_same_purchase(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        before = test_usdc.balance_of(seller.pay_to)
        elicitations = UrlElicitations("accept")
        arguments = {"url": seller.url("/premium"), "maxAmountUsd": "0.05"}
        async with eliciting_client(
            server.mcp_url, setup.token, mode=MODERN, elicitations=elicitations
        ) as client:
            first = await client.session.call_tool("fetch_paid", arguments, allow_input_required=True)
            ask, state = _input_required(first)
            assert (ask.mode, ask.message) == ("url", PROMPT_MESSAGE)
            assert ask.url.startswith(f"{server.settings.public_url}/approvals/apr_")
            assert state.startswith("pwas1.")
            approval_id = ask.url.rsplit("/", 1)[1]

            # Not decided yet, the person declined to open the page: pending, and nothing waits.
            declined = await client.session.call_tool(
                "fetch_paid",
                arguments,
                input_responses={"approval": ElicitResult(action="decline")},
                request_state=state,
                allow_input_required=True,
            )
            assert isinstance(declined, CallToolResult)
            held = structured(declined)
            assert (held["status"], held["approvalId"], held["approvalPrompt"]) == (
                "pending_approval",
                approval_id,
                "declined",
            )

            await decide(db.url, approval_id, member=member, approve=True)
            retried = await client.session.call_tool(
                "fetch_paid",
                arguments,
                input_responses={"approval": ElicitResult(action="accept")},
                request_state=state,
                allow_input_required=True,
            )
            assert isinstance(retried, CallToolResult)
            paid = structured(retried)
        assert (paid["status"], paid["idempotencyKey"]) == ("paid", held["idempotencyKey"])
        assert test_usdc.balance_of(seller.pay_to) - before == PREMIUM


async def test_modern_sdk_driver_waits_on_the_retry_and_pays(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    """The SDK's own multi-round-trip driver: it shows the URL, retries with the state, and the
    retry waits for the decision made meanwhile by another process."""
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=MODERN, elicitations=elicitations
        ) as client:
            result = await _call_and_decide(
                client,
                {"url": seller.url("/premium")},
                elicitations,
                database_url=db.url,
                member=member,
                approve=True,
            )
        assert structured(result)["status"] == "paid"
        assert elicitations.only().mode == "url"


async def test_modern_retry_with_other_arguments_or_a_bad_state_is_refused(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    clock = ShiftedClock()
    with _server(db, anvil, test_usdc, wait_ms=0, clock=clock) as server:
        setup, _member = _agent(db, server, funded_wallet)
        other = make_agent(db, server.settings, allow_hosts=["127.0.0.1"], org_id=setup.org_id, name="other")
        arguments = {"url": seller.url("/premium")}
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=MODERN, elicitations=elicitations
        ) as client:
            _ask, state = _input_required(
                await client.session.call_tool("fetch_paid", arguments, allow_input_required=True)
            )

            async def retry(args: dict[str, Any], sealed: str, on: Client = client) -> dict[str, Any]:
                result = await on.session.call_tool(
                    "fetch_paid",
                    args,
                    input_responses={"approval": ElicitResult(action="accept")},
                    request_state=sealed,
                    allow_input_required=True,
                )
                assert isinstance(result, CallToolResult)
                return error_of(result)

            changed = await retry({**arguments, "maxAmountUsd": "0.50"}, state)
            assert (changed["code"], changed["reason"]) == ("invalid_input", "approval_state_mismatch")
            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            forged = await retry(arguments, tampered)
            assert (forged["code"], forged["reason"]) == ("invalid_input", "invalid_approval_state")
            nonsense = await retry(arguments, "not a state")
            assert nonsense["reason"] == "invalid_approval_state"
            async with eliciting_client(
                server.mcp_url, other.token, mode=MODERN, elicitations=UrlElicitations()
            ) as stranger:
                foreign = await retry(arguments, state, on=stranger)
            assert foreign["reason"] == "invalid_approval_state"

            clock.advance(15 * 60 + 10 * 60 + 1)  # past the approval's TTL and the retry window
            expired = await retry(arguments, state)
            assert expired["reason"] == "invalid_approval_state"


# -- pay_x402, held the same way ----------------------------------------------------------------


async def test_a_held_pay_x402_is_offered_and_the_same_call_hands_over_the_header(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        required = challenge_of(seller, "/premium")
        elicitations = UrlElicitations("accept")
        async with eliciting_client(
            server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations
        ) as client:

            async def by_command_line(request: ElicitRequestURLParams) -> object:
                return await decide(db.url, approval_id_of(request), member=member, approve=True)

            result = await call_while_deciding(
                client,
                pay_args(seller.url("/premium"), required),
                elicitations,
                by_command_line,
                tool="pay_x402",
            )
        signed = structured(result)
        assert (signed["status"], signed["headerName"]) == ("signed", "PAYMENT-SIGNATURE")
        assert elicitations.only().message == PROMPT_MESSAGE
        assert elicitations.completed == [elicitations.only().elicitation_id]
        before = test_usdc.balance_of(seller.pay_to)
        assert send(seller.url("/premium"), signed).status_code == 200
        assert test_usdc.balance_of(seller.pay_to) - before == PREMIUM


async def test_modern_pay_x402_state_continues_only_pay_x402(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        url = seller.url("/premium")
        arguments = pay_args(url, challenge_of(seller, "/premium"))
        async with eliciting_client(
            server.mcp_url, setup.token, mode=MODERN, elicitations=UrlElicitations("accept")
        ) as client:
            ask, state = _input_required(
                await client.session.call_tool("pay_x402", arguments, allow_input_required=True)
            )
            await decide(db.url, ask.url.rsplit("/", 1)[1], member=member, approve=True)
            answer: dict[str, Any] = {"approval": ElicitResult(action="accept")}
            # The state is bound to the tool it was issued for: fetch_paid cannot continue it.
            crossed = await client.session.call_tool(
                "fetch_paid",
                {"url": url},
                input_responses=answer,
                request_state=state,
                allow_input_required=True,
            )
            assert isinstance(crossed, CallToolResult)
            assert error_of(crossed)["reason"] == "invalid_approval_state"
            retried = await client.session.call_tool(
                "pay_x402", arguments, input_responses=answer, request_state=state, allow_input_required=True
            )
            assert isinstance(retried, CallToolResult)
        assert structured(retried)["status"] == "signed"


async def test_a_client_that_goes_away_stops_the_wait(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    """The call is abandoned while it waits; an approval made afterwards pays nothing by itself."""
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        before = test_usdc.balance_of(seller.pay_to)
        elicitations = UrlElicitations("accept")
        async with (
            eliciting_client(server.mcp_url, setup.token, mode=LEGACY, elicitations=elicitations) as client,
            anyio.create_task_group() as group,
        ):
            group.start_soon(client.call_tool, "fetch_paid", {"url": seller.url("/premium")})
            with anyio.fail_after(20):
                await elicitations.asked.wait()
            group.cancel_scope.cancel()
        approval_id = elicitations.only().url.rsplit("/", 1)[1]
        await decide(db.url, approval_id, member=member, approve=True)
        await anyio.sleep(3)  # more than one poll of a wait that would still be running
        assert test_usdc.balance_of(seller.pay_to) == before
        async with eliciting_client(server.mcp_url, setup.token, mode=MODERN, elicitations=None) as client:
            status = structured(await client.call_tool("get_approval_status", {"approvalId": approval_id}))
        assert (status["status"], status.get("intentId")) == ("approved", None)


async def test_a_dropped_connection_stops_the_wait(
    db: Database, anvil: Any, seller: Seller, test_usdc: TestToken, funded_wallet: FundedWallet
) -> None:
    """Raw HTTP at 2025-11-25: the client answers the elicitation, then drops the call's
    connection without a word. The wait ends; an approval made afterwards pays nothing by itself."""
    with _server(db, anvil, test_usdc, wait_ms=SHARED_WAIT_MS) as server:
        setup, member = _agent(db, server, funded_wallet)
        before = test_usdc.balance_of(seller.pay_to)
        headers = {
            "Authorization": f"Bearer {setup.token}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-11-25",
        }
        opening = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"url": {}}},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        }
        async with httpx.AsyncClient(timeout=30) as http:
            opened = await http.post(server.mcp_url, headers=headers, json=opening)
            assert opened.status_code == 200
            headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await http.post(server.mcp_url, headers=headers, json=initialized)).status_code == 202
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "fetch_paid", "arguments": {"url": seller.url("/premium")}},
            }
            asked: dict[str, Any] = {}
            with anyio.fail_after(20):
                async with http.stream("POST", server.mcp_url, headers=headers, json=call) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:") and "elicitation/create" in line:
                            asked = json.loads(line[5:])
                            break
                    answer = {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept"}}
                    async with httpx.AsyncClient(timeout=30) as other:
                        response = await other.post(server.mcp_url, headers=headers, json=answer)
                        assert response.status_code == 202
            # Leaving the block closed the call's connection mid-stream.
        approval_id = asked["params"]["url"].rsplit("/", 1)[1]
        await decide(db.url, approval_id, member=member, approve=True)
        await anyio.sleep(3)  # more than one poll of a wait that would still be running
        assert test_usdc.balance_of(seller.pay_to) == before
        async with eliciting_client(server.mcp_url, setup.token, mode=MODERN, elicitations=None) as client:
            status = structured(await client.call_tool("get_approval_status", {"approvalId": approval_id}))
        assert (status["status"], status.get("intentId")) == ("approved", None)
