"""State lives in the database, so several `paywarden serve` processes serve one set of people:
a rate limit counts requests made to any of them, and one refresh token sent to two processes at
the same moment gets the same new pair from both."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from server.kit.clock import Clock, SystemClock
from server.kit.db import Database
from server.settings import Settings
from tests.support.oauth import call_tool, connect, enrolled_person, refresh_with, rpc_result
from tests.support.paywarden import settings_for
from tests.support.processes import serve_processes


@dataclass(frozen=True)
class Deployment:
    """What the test helpers need of a server: its settings and the URL people use."""

    settings: Settings
    public_url: str
    # `paywarden serve` processes keep the machine's time.
    clock: Clock = field(default_factory=SystemClock)


def _deployment(db: Database, public_url: str) -> Deployment:
    port = int(public_url.rsplit(":", 1)[1])
    return Deployment(settings_for(database_url=db.url, port=port, public_host="localhost"), public_url)


def test_a_rate_limit_holds_across_processes(db: Database, tmp_path: Path) -> None:
    extra = {"PAYWARDEN_RATE_LIMIT_REGISTER": "4", "PAYWARDEN_BACKGROUND_JOBS": "0"}
    with serve_processes(2, database_url=db.url, extra=extra, workdir=tmp_path) as (_, processes):
        codes = [
            httpx.post(
                f"{processes[index % 2].base_url}/oauth/register",
                json={"redirect_uris": ["http://127.0.0.1/cb"], "token_endpoint_auth_method": "none"},
                timeout=15,
            ).status_code
            for index in range(6)
        ]
    assert codes == [201, 201, 201, 201, 429, 429]


def test_one_refresh_token_sent_to_two_processes_at_once(db: Database, tmp_path: Path) -> None:
    extra = {"PAYWARDEN_BACKGROUND_JOBS": "0"}
    with serve_processes(2, database_url=db.url, extra=extra, workdir=tmp_path, public_host="localhost") as (
        public_url,
        processes,
    ):
        deployment = _deployment(db, public_url)
        person = enrolled_person(deployment, db)
        client, first = connect(deployment, person)
        person.browser.close()
        answers: dict[int, httpx.Response] = {}
        start = threading.Barrier(2)

        def refresh(index: int) -> None:
            start.wait(timeout=10)
            answers[index] = refresh_with(
                deployment,
                client["client_id"],
                first["refresh_token"],
                base_url=processes[index].base_url,
            )

        threads = [threading.Thread(target=refresh, args=(index,)) for index in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(answers) == [0, 1]
        assert [answers[i].status_code for i in (0, 1)] == [200, 200], [answers[i].text for i in (0, 1)]
        pairs = {(answers[i].json()["access_token"], answers[i].json()["refresh_token"]) for i in (0, 1)}
        assert len(pairs) == 1
        access, refresh_token = pairs.pop()
        for process in processes:
            assert rpc_result(call_tool(process.mcp_url, access, "get_budget"))
        assert refresh_with(deployment, client["client_id"], refresh_token).status_code == 200
