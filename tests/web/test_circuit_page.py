"""The overview's blocked sellers: an open seller circuit is shown to every member, and only an
owner or admin clears it (with the form's CSRF token); a cleared host is no longer blocked."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.kit.ids import new_id
from server.models import AuditEvent, SellerCircuit
from server.payments.circuits import open_circuit
from server.vocabulary import Role
from tests.support.clocks import frozen_clock
from tests.support.oauth import csrf_of, enrolled_person
from tests.support.paywarden import RunningServer, serve

HOST = "api.blocked.example"


@pytest.fixture
def server(sqlite_db: Database) -> Iterator[RunningServer]:
    with serve(sqlite_db.url, public_host="localhost", clock=frozen_clock()) as running:
        yield running


def _open(db: Database, org_id: str, server: RunningServer) -> None:
    now = server.clock.now()
    with db.write() as session:
        session.add(
            SellerCircuit(
                id=new_id("circuit"),
                org_id=org_id,
                host=HOST,
                failures=3,
                opened_at=now,
                open_until=now + timedelta(days=7),
            )
        )


def test_members_see_a_blocked_seller_and_only_an_owner_or_admin_clears_it(
    server: RunningServer, sqlite_db: Database
) -> None:
    owner = enrolled_person(server, sqlite_db)
    org_id = owner.agent.org_id
    viewer = enrolled_person(server, sqlite_db, role=Role.VIEWER, org_id=org_id)
    try:
        assert "Blocked sellers" not in owner.browser.get("/admin").text
        _open(sqlite_db, org_id, server)

        seen = viewer.browser.get("/admin")
        assert "Blocked sellers" in seen.text
        assert HOST in seen.text
        assert "Let agents pay" not in seen.text  # no form for a viewer
        refused = viewer.browser.http.post(
            "/admin/circuits/clear", data={"host": HOST, "csrf": csrf_of(seen.text)}
        )
        assert refused.status_code == 403
        assert "You are a viewer of this organisation" in refused.text

        page = owner.browser.get("/admin")
        assert f"Let agents pay {HOST} again" in page.text
        no_csrf = owner.browser.http.post("/admin/circuits/clear", data={"host": HOST})
        assert no_csrf.status_code >= 400
        with sqlite_db.read() as session:
            assert open_circuit(session, org_id=org_id, host=HOST, now=server.clock.now()) is not None

        # Payments to the host would resume: that waits for a passkey first (sudo).
        unconfirmed = owner.browser.http.post(
            "/admin/circuits/clear", data={"host": HOST, "csrf": csrf_of(page.text)}
        )
        assert unconfirmed.status_code == 303
        assert unconfirmed.headers["location"].startswith("/account/sudo?next=")
        with sqlite_db.read() as session:
            assert open_circuit(session, org_id=org_id, host=HOST, now=server.clock.now()) is not None
        owner.browser.sudo()
        page = owner.browser.get("/admin")
        cleared = owner.browser.http.post(
            "/admin/circuits/clear", data={"host": HOST, "csrf": csrf_of(page.text)}
        )
        assert cleared.status_code == 303
        assert cleared.headers["location"] == "/admin"
        with sqlite_db.read() as session:
            assert open_circuit(session, org_id=org_id, host=HOST, now=server.clock.now()) is None
            events = session.exec(
                select(AuditEvent).where(
                    AuditEvent.org_id == org_id, AuditEvent.type == "seller_circuit.cleared"
                )
            ).all()
        assert [event.data["host"] for event in events] == [HOST]
        assert "Blocked sellers" not in owner.browser.get("/admin").text
    finally:
        owner.browser.close()
        viewer.browser.close()
