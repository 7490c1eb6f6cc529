"""Several `paywarden serve` processes behind a load balancer with affinity on `Mcp-Session-Id`
(a small proxy on loopback): a stateful session lives on the process that opened it across many
calls, requests without a session go to any process, and a call waiting in one process for a
person is woken by a decision written by another process."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from server.kit.db import Database
from tests.support.affinity_proxy import AffinityProxy
from tests.support.chain import TestToken
from tests.support.elicitation import LEGACY, MODERN, UrlElicitations, decide, eliciting_client
from tests.support.fixtures_chain import FundedWallet
from tests.support.haproxy import HAProxy
from tests.support.paywarden import chain_environ, settings_for, structured
from tests.support.processes import serve_processes
from tests.support.seller import Seller
from tests.support.tenants import make_agent, make_member

pytestmark = [pytest.mark.anyio, pytest.mark.chain]

CALLS_ON_SESSION = 12


async def test_a_session_lives_on_one_process_behind_an_affinity_proxy_and_a_decision_elsewhere_wakes_it(
    db: Database,
    anvil: Any,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": "20000",
    }
    with serve_processes(2, database_url=db.url, extra=extra, workdir=tmp_path) as (public_url, servers):
        settings = settings_for(database_url=db.url, port=int(public_url.rsplit(":", 1)[1]), extra=extra)
        setup = make_agent(db, settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key)
        member = make_member(db, setup.org_id, role="approver")
        backends = [server.base_url for server in servers]
        with AffinityProxy(backends) as proxy:
            elicitations = UrlElicitations("accept")
            async with eliciting_client(
                f"{proxy.url}/mcp", setup.token, mode=LEGACY, elicitations=elicitations
            ) as client:
                for _ in range(CALLS_ON_SESSION):
                    assert structured(await client.call_tool("get_budget", {}))["agentId"] == setup.agent_id
                (session_id,) = proxy.sessions
                home = proxy.backend_of(session_id)
                assert proxy.hits[(home, True)] >= CALLS_ON_SESSION
                assert all(hits == 0 for (backend, on), hits in proxy.hits.items() if on and backend != home)

                # The same session id at the other process: unknown there. Affinity is required.
                elsewhere = next(backend for backend in backends if backend != home)
                async with httpx.AsyncClient() as raw:
                    lost = await raw.post(
                        f"{elsewhere}/mcp",
                        headers={
                            "Authorization": f"Bearer {setup.token}",
                            "Mcp-Session-Id": session_id,
                            "MCP-Protocol-Version": "2025-11-25",
                            "Accept": "application/json, text/event-stream",
                        },
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    )
                assert lost.status_code == 404

                # Requests without a session are served by whichever process gets them.
                async with eliciting_client(
                    f"{proxy.url}/mcp", setup.token, mode=MODERN, elicitations=None
                ) as stateless:
                    for _ in range(4):
                        assert (
                            structured(await stateless.call_tool("get_budget", {}))["agentId"]
                            == setup.agent_id
                        )
                assert all(proxy.hits[(backend, False)] >= 2 for backend in backends)

                # A held payment on the session: the call waits in its process; the decision is
                # written by another process and wakes it.
                result: list[Any] = []

                async def call() -> None:
                    result.append(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))

                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    with anyio.fail_after(20):
                        await elicitations.asked.wait()
                    approval_id = elicitations.only().url.rsplit("/", 1)[1]
                    await decide(db.url, approval_id, member=member, approve=True)
                paid = structured(result[0])
                assert (paid["status"], paid["receipt"]["state"]) == ("paid", "settled")
                assert proxy.sessions == {session_id: home}


async def test_the_load_balancer_of_infra_keeps_a_session_on_its_process_and_a_decision_elsewhere_wakes_it(
    sqlite_db: Database,
    anvil: Any,
    seller: Seller,
    test_usdc: TestToken,
    funded_wallet: FundedWallet,
    tmp_path: Path,
) -> None:
    """The same story through HAProxy with infra/haproxy.cfg, the file compose runs: it learns a
    session's process from the answer to `initialize` and sends the session's requests there. The
    proxy is the subject, not SQL: one database."""
    db = sqlite_db
    extra = {
        **chain_environ(rpc_url=anvil.rpc_url, token_address=test_usdc.address),
        "PAYWARDEN_APPROVAL_WAIT_MS": "20000",
    }
    with serve_processes(2, database_url=db.url, extra=extra, workdir=tmp_path) as (public_url, servers):
        settings = settings_for(database_url=db.url, port=int(public_url.rsplit(":", 1)[1]), extra=extra)
        setup = make_agent(db, settings, allow_hosts=["127.0.0.1"], wallet_key=funded_wallet.private_key)
        member = make_member(db, setup.org_id, role="approver")
        replicas = {"replica1": servers[0].base_url, "replica2": servers[1].base_url}
        with HAProxy(list(replicas.values()), tmp_path) as proxy:
            elicitations = UrlElicitations("accept")
            async with eliciting_client(
                f"{proxy.url}/mcp", setup.token, mode=LEGACY, elicitations=elicitations
            ) as client:
                # Round robin alone would send every other call to the process without the session.
                for _ in range(CALLS_ON_SESSION):
                    assert structured(await client.call_tool("get_budget", {}))["agentId"] == setup.agent_id
                ((session_id, home),) = proxy.sessions().items()
                elsewhere = next(url for name, url in replicas.items() if name != home)
                async with httpx.AsyncClient() as raw:
                    lost = await raw.post(
                        f"{elsewhere}/mcp",
                        headers={
                            "Authorization": f"Bearer {setup.token}",
                            "Mcp-Session-Id": session_id,
                            "MCP-Protocol-Version": "2025-11-25",
                            "Accept": "application/json, text/event-stream",
                        },
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                    )
                assert lost.status_code == 404

                before = proxy.requests_per_replica()
                async with eliciting_client(
                    f"{proxy.url}/mcp", setup.token, mode=MODERN, elicitations=None
                ) as stateless:
                    for _ in range(4):
                        budget = structured(await stateless.call_tool("get_budget", {}))
                        assert budget["agentId"] == setup.agent_id
                after = proxy.requests_per_replica()
                assert all(after[name] > before[name] for name in replicas), (before, after)

                result: list[Any] = []

                async def call() -> None:
                    result.append(await client.call_tool("fetch_paid", {"url": seller.url("/premium")}))

                async with anyio.create_task_group() as group:
                    group.start_soon(call)
                    with anyio.fail_after(20):
                        await elicitations.asked.wait()
                    approval_id = elicitations.only().url.rsplit("/", 1)[1]
                    await decide(db.url, approval_id, member=member, approve=True)
                paid = structured(result[0])
                assert (paid["status"], paid["receipt"]["state"]) == ("paid", "settled")
                assert proxy.sessions() == {session_id: home}

            # /metrics is the scraper's, on the processes themselves: the proxy does not pass it.
            async with httpx.AsyncClient() as raw:
                assert (await raw.get(f"{proxy.url}/metrics")).status_code == 404
                assert (await raw.get(f"{servers[0].base_url}/metrics")).status_code == 200
                # The proxy gives each request an id, which the process answers; one sent is kept.
                made = (await raw.get(f"{proxy.url}/healthz")).headers["x-request-id"]
                assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", made)
                kept = await raw.get(f"{proxy.url}/healthz", headers={"X-Request-Id": "from-the-caller"})
                assert kept.headers["x-request-id"] == "from-the-caller"
