"""/admin/members without a browser: the list, inviting (after sudo, the link shown once),
changing a role (lowering at once, raising after sudo), disabling and enabling, and the refusals:
a viewer's post, a post without its CSRF token, bad input."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from server.kit.db import Database
from server.vocabulary import Role
from tests.support.oauth import Person, SoftBrowser, enroll_token, enrolled_person
from tests.support.org_pages import clock, colleague, member_row, owner, post_form, server, text_of
from tests.support.paywarden import RunningServer, serve
from tests.support.processes import serve_processes

__all__ = ["clock", "owner", "server"]  # fixtures
PAGE = "/admin/members"
SUDO = "/account/sudo?next=%2Fadmin%2Fmembers"


def test_the_list_says_who_each_member_is(server: RunningServer, sqlite_db: Database, owner: Person) -> None:
    viewer = colleague(server, sqlite_db, owner, Role.VIEWER)
    listed = owner.browser.get(PAGE)
    assert listed.status_code == 200
    text = text_of(listed)
    viewer_email = member_row(sqlite_db, owner.agent.org_id, viewer.member_id).email
    assert viewer_email in text
    assert "viewer" in text
    assert "Passkeys" in text
    assert "Last sign-in" in text
    assert re.search(r"<dt>Passkeys</dt><dd>1</dd>", listed.text)
    assert "never" not in text  # both signed in when they enrolled
    assert 'aria-current="page">Members' in listed.text
    for link in ("/admin", "/approvals", "/admin/members", "/admin/audit", "/connections", "/admin/settings"):
        assert f'href="{link}"' in listed.text
    viewer.browser.close()


def test_inviting_waits_for_sudo_first(server: RunningServer, sqlite_db: Database, owner: Person) -> None:
    answer = post_form(owner, PAGE, f"{PAGE}/invite", {"email": "new@example.com", "role": "viewer"})
    assert answer.status_code == 303
    assert answer.headers["location"] == SUDO
    assert "new@example.com" not in text_of(owner.browser.get(PAGE))


def test_an_invitation_after_sudo_shows_its_link_once(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    owner.browser.sudo(PAGE)
    answer = post_form(owner, PAGE, f"{PAGE}/invite", {"email": " New@Example.com ", "role": "approver"})
    assert answer.status_code == 200, answer.text
    link = re.search(r'<code class="code" id="enroll-link">([^<]+)</code>', answer.text)
    assert link is not None
    assert link.group(1).startswith(f"{server.settings.pages_url}/enroll/")
    assert "It works once, for 24 hours" in answer.text
    again = owner.browser.get(PAGE)
    assert "new@example.com" in again.text
    assert link.group(1) not in again.text  # shown once
    with SoftBrowser(server) as newcomer:
        newcomer.enroll(enroll_token(link.group(1)))
        assert newcomer.get("/admin").status_code == 200


def test_an_invitation_is_checked_before_anything(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    bad_email = post_form(owner, PAGE, f"{PAGE}/invite", {"email": "not an email", "role": "viewer"})
    assert bad_email.status_code == 400
    assert "The email address is not valid." in text_of(bad_email)
    assert 'value="not an email"' in bad_email.text  # what was typed stays
    existing = member_row(sqlite_db, owner.agent.org_id, owner.member_id).email
    taken = post_form(owner, PAGE, f"{PAGE}/invite", {"email": existing.upper(), "role": "viewer"})
    assert taken.status_code == 409
    assert "A member with this email is already in your organisation." in text_of(taken)
    bad_role = post_form(owner, PAGE, f"{PAGE}/invite", {"email": "a@example.com", "role": "emperor"})
    assert bad_role.status_code == 400
    assert "The role must be one of owner, admin, approver, viewer." in text_of(bad_role)


def test_lowering_a_role_is_at_once_and_raising_one_waits_for_sudo(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    admin = colleague(server, sqlite_db, owner, Role.ADMIN)
    org_id = owner.agent.org_id
    lowered = post_form(owner, PAGE, f"{PAGE}/{admin.member_id}/role", {"role": "viewer"})
    assert lowered.status_code == 303
    assert lowered.headers["location"] == f"{PAGE}?done=role"
    assert member_row(sqlite_db, org_id, admin.member_id).role is Role.VIEWER
    raised = post_form(owner, PAGE, f"{PAGE}/{admin.member_id}/role", {"role": "admin"})
    assert raised.status_code == 303
    assert raised.headers["location"] == SUDO
    assert member_row(sqlite_db, org_id, admin.member_id).role is Role.VIEWER
    bad = post_form(owner, PAGE, f"{PAGE}/{admin.member_id}/role", {"role": "root"})
    assert bad.status_code == 400
    assert "The role must be one of owner, admin, approver, viewer." in text_of(bad)
    unknown = post_form(owner, PAGE, f"{PAGE}/mem_nobody/role", {"role": "viewer"})
    assert unknown.status_code == 404
    admin.browser.close()


def test_the_last_owner_keeps_the_role(server: RunningServer, sqlite_db: Database, owner: Person) -> None:
    answer = post_form(owner, PAGE, f"{PAGE}/{owner.member_id}/role", {"role": "viewer"})
    assert answer.status_code == 409
    assert "last enabled owner" in text_of(answer)
    assert member_row(sqlite_db, owner.agent.org_id, owner.member_id).role is Role.OWNER


def test_an_admin_cannot_touch_the_owner_role(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    admin = colleague(server, sqlite_db, owner, Role.ADMIN)
    viewer = colleague(server, sqlite_db, owner, Role.VIEWER)
    for action, fields in (
        (f"{PAGE}/{viewer.member_id}/role", {"role": "owner"}),
        (f"{PAGE}/{owner.member_id}/role", {"role": "viewer"}),
        (f"{PAGE}/{owner.member_id}/disable", {}),
        (f"{PAGE}/invite", {"email": "boss@example.com", "role": "owner"}),
    ):
        answer = post_form(admin, PAGE, action, fields)
        assert answer.status_code == 403, action
        assert "Only an owner can give or take the owner role" in text_of(answer)
    assert member_row(sqlite_db, owner.agent.org_id, owner.member_id).disabled_at is None
    admin.browser.close()
    viewer.browser.close()


def test_a_viewer_sees_the_forms_disabled_and_is_refused(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    viewer = colleague(server, sqlite_db, owner, Role.VIEWER)
    shown = viewer.browser.get(PAGE)
    assert shown.status_code == 200
    fieldsets = re.findall(r"<fieldset[^>]*>", shown.text)
    assert fieldsets
    assert all("disabled" in tag for tag in fieldsets)
    assert "Only an owner or an admin changes members." in text_of(shown)
    for action, fields in (
        (f"{PAGE}/invite", {"email": "x@example.com", "role": "viewer"}),
        (f"{PAGE}/{owner.member_id}/role", {"role": "viewer"}),
        (f"{PAGE}/{owner.member_id}/disable", {}),
        (f"{PAGE}/{owner.member_id}/enable", {}),
    ):
        answer = post_form(viewer, PAGE, action, fields)
        assert answer.status_code == 403, action
        assert (
            "Only an owner or an admin of your organisation can invite, change or disable members."
            in text_of(answer)
        )
    assert member_row(sqlite_db, owner.agent.org_id, owner.member_id).disabled_at is None
    viewer.browser.close()


def test_a_form_without_its_csrf_token_is_refused(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    viewer = colleague(server, sqlite_db, owner, Role.VIEWER)
    for action, fields in (
        (f"{PAGE}/invite", {"email": "x@example.com", "role": "viewer"}),
        (f"{PAGE}/{viewer.member_id}/role", {"role": "approver"}),
        (f"{PAGE}/{viewer.member_id}/disable", {}),
        (f"{PAGE}/{viewer.member_id}/enable", {}),
    ):
        for csrf in (None, "forged"):
            data = fields if csrf is None else {"csrf": csrf, **fields}
            answer = owner.browser.http.post(action, data=data)
            assert answer.status_code == 403, action
    assert member_row(sqlite_db, owner.agent.org_id, viewer.member_id).disabled_at is None
    viewer.browser.close()


def test_nobody_disables_themselves(server: RunningServer, owner: Person) -> None:
    answer = post_form(owner, PAGE, f"{PAGE}/{owner.member_id}/disable")
    assert answer.status_code == 403
    assert "You cannot disable yourself" in text_of(answer)


def test_a_disabled_member_is_signed_out_and_their_passkey_refused(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    approver = colleague(server, sqlite_db, owner, Role.APPROVER)
    assert approver.browser.get("/approvals").status_code == 200
    cookie = {"pw_session": approver.browser.http.cookies["pw_session"]}
    disabled = post_form(owner, PAGE, f"{PAGE}/{approver.member_id}/disable")
    assert disabled.status_code == 303
    assert disabled.headers["location"] == f"{PAGE}?done=disabled"
    assert "Disabled" in text_of(owner.browser.get(PAGE))
    # The next request of their open session is refused, and their passkey signs nothing in.
    assert approver.browser.get("/approvals").headers["location"].startswith("/login")
    refused = approver.browser.ceremony("/login", "/login/options", "/login/verify", next="/admin")
    assert refused.status_code == 403
    # Enabling them again does not bring the old session back: they sign in anew.
    enabled = post_form(owner, PAGE, f"{PAGE}/{approver.member_id}/enable")
    assert enabled.headers["location"] == f"{PAGE}?done=enabled"
    with httpx.Client(base_url=server.settings.pages_origin, cookies=cookie) as old:
        assert old.get("/approvals").status_code == 302
    assert approver.browser.sign_in("/approvals").json() == {"redirect": "/approvals"}
    assert approver.browser.get("/approvals").status_code == 200
    approver.browser.close()


def test_a_disabled_members_session_is_refused_by_another_process(
    sqlite_db: Database, tmp_path: Path
) -> None:
    """Two servers on one database, both on the machine's clock (a `paywarden serve` process keeps
    it): the owner disables a member on one, and the member's session is refused by the other."""
    extra = {"PAYWARDEN_BACKGROUND_JOBS": "0"}
    with (
        serve(sqlite_db.url, public_host="localhost") as here,
        serve_processes(
            1, database_url=sqlite_db.url, extra=extra, workdir=tmp_path, public_host="localhost"
        ) as (elsewhere_url, _),
    ):
        boss = enrolled_person(here, sqlite_db)
        approver = colleague(here, sqlite_db, boss, Role.APPROVER)
        session_cookie = {"pw_session": approver.browser.http.cookies["pw_session"]}
        with httpx.Client(base_url=elsewhere_url, cookies=session_cookie, timeout=15) as elsewhere:
            assert elsewhere.get("/approvals").status_code == 200
            post_form(boss, PAGE, f"{PAGE}/{approver.member_id}/disable")
            refused = elsewhere.get("/approvals")
        boss.browser.close()
        approver.browser.close()
    assert refused.status_code == 302
    assert refused.headers["location"].startswith("/login")


def test_an_admin_manages_members_and_an_approver_does_not(
    server: RunningServer, sqlite_db: Database, owner: Person
) -> None:
    admin = colleague(server, sqlite_db, owner, Role.ADMIN)
    approver = colleague(server, sqlite_db, owner, Role.APPROVER)
    refused = post_form(approver, PAGE, f"{PAGE}/{admin.member_id}/disable")
    assert refused.status_code == 403
    assert member_row(sqlite_db, owner.agent.org_id, admin.member_id).disabled_at is None
    disabled = post_form(admin, PAGE, f"{PAGE}/{approver.member_id}/disable")
    assert disabled.headers["location"] == f"{PAGE}?done=disabled"
    assert member_row(sqlite_db, owner.agent.org_id, approver.member_id).disabled_at is not None
    lowered = post_form(admin, PAGE, f"{PAGE}/{approver.member_id}/role", {"role": "viewer"})
    assert lowered.headers["location"] == f"{PAGE}?done=role"
    admin.browser.close()
    approver.browser.close()
