"""`paywarden admin member list|disable|enable`: a disabled member's signed-in browser is signed
out on its next request and their passkey signs nothing in; enabled again, the same passkey signs
in as before."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from server.kit.db import Database
from tests.support.cli import run_cli
from tests.support.oauth import Person, enrolled_person
from tests.support.paywarden import RunningServer, serve


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with serve(db.url, public_host="localhost") as running:
        yield running


@pytest.fixture
def person(server: RunningServer, db: Database) -> Iterator[Person]:
    member = enrolled_person(server, db)
    yield member
    member.browser.close()


def test_a_disabled_member_is_signed_out_and_cannot_sign_in(
    server: RunningServer, db: Database, person: Person
) -> None:
    org = person.agent.org_id
    listed = run_cli(db.url, "admin", "member", "list", "--org", org, "--json").json()
    (row,) = listed["members"]
    assert (row["memberId"], row["enrolled"], row["disabled"]) == (person.member_id, True, False)
    assert person.browser.get("/admin").status_code == 200

    disabled = run_cli(db.url, "admin", "member", "disable", person.member_id, "--org", org, "--json").json()
    assert disabled["disabled"] is True
    signed_out = person.browser.get("/admin")
    assert signed_out.status_code in (302, 303)
    assert signed_out.headers["location"].startswith("/login")
    refused = person.browser.sign_in()
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"] == "member_disabled"
    assert person.browser.get("/admin").headers["location"].startswith("/login")
    assert "(disabled)" in run_cli(db.url, "admin", "member", "list", "--org", org).stdout

    run_cli(db.url, "admin", "member", "enable", row["email"], "--org", org, "--json").json()
    answer = person.browser.sign_in()
    assert answer.status_code == 200, answer.text
    assert person.browser.get("/admin").status_code == 200
