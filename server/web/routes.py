"""Every route of the web entry point: discovery, the authorization server, the pages, and the
stylesheet and script they use."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from server.settings import Settings
from server.web import oauth, wellknown
from server.web.api import routes as admin_api
from server.web.pages import (
    account,
    agents,
    api_tokens,
    approvals,
    audit_log,
    changes,
    connections,
    enroll,
    home,
    members,
    org_settings,
    policy_changes,
    signin,
    sudo,
)
from server.web.pages.common import page

STATIC = Path(__file__).resolve().parent / "static"


async def favicon(_request: Request) -> Response:
    """Browsers ask for /favicon.ico whatever the page says: the one icon, not a 404."""
    return RedirectResponse("/static/favicon.svg", status_code=301)


def routes(settings: Settings) -> list[BaseRoute]:
    return [
        *wellknown.routes(settings),
        *oauth.routes(),
        *admin_api.routes(),
        Route("/", endpoint=home.root, methods=["GET"]),
        Route("/admin", endpoint=page(home.show, signed_in=True), methods=["GET"]),
        Route(home.CLEAR_PATH, endpoint=page(home.clear, signed_in=True), methods=["POST"]),
        Route("/login", endpoint=page(signin.login_page), methods=["GET"]),
        Route("/login/options", endpoint=page(signin.login_options, json=True), methods=["POST"]),
        Route("/login/verify", endpoint=page(signin.login_verify, json=True), methods=["POST"]),
        Route("/logout", endpoint=page(signin.logout_page), methods=["GET"]),
        Route("/logout", endpoint=page(signin.logout, signed_in=True), methods=["POST"]),
        Route("/enroll/{token}", endpoint=page(enroll.enroll_page), methods=["GET"]),
        Route("/enroll/{token}/options", endpoint=page(enroll.enroll_options, json=True), methods=["POST"]),
        Route("/enroll/{token}/verify", endpoint=page(enroll.enroll_verify, json=True), methods=["POST"]),
        Route(account.PATH, endpoint=page(account.show, signed_in=True), methods=["GET"]),
        Route(sudo.PATH, endpoint=page(sudo.show, signed_in=True), methods=["GET"]),
        Route(
            f"{sudo.PATH}/options", endpoint=page(sudo.options, signed_in=True, json=True), methods=["POST"]
        ),
        Route(f"{sudo.PATH}/verify", endpoint=page(sudo.verify, signed_in=True, json=True), methods=["POST"]),
        Route(f"{changes.PATH}/{{change_id}}", endpoint=page(changes.show, signed_in=True), methods=["GET"]),
        Route(
            f"{changes.PATH}/{{change_id}}/options",
            endpoint=page(changes.options, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{changes.PATH}/{{change_id}}/verify",
            endpoint=page(changes.verify_change, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{account.PATH}/step-up/options",
            endpoint=page(account.step_up_options, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{account.PATH}/step-up/verify",
            endpoint=page(account.step_up_verify, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            "/account/sign-out-everywhere",
            endpoint=page(account.sign_out_everywhere, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{account.PATH}/options",
            endpoint=page(account.add_options, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{account.PATH}/verify",
            endpoint=page(account.add_verify, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{account.PATH}/{{passkey_id}}/rename",
            endpoint=page(account.rename, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{account.PATH}/{{passkey_id}}/remove",
            endpoint=page(account.remove, signed_in=True),
            methods=["POST"],
        ),
        Route(connections.PATH, endpoint=page(connections.show, signed_in=True), methods=["GET"]),
        Route(
            f"{connections.PATH}/{{grant_id}}/revoke",
            endpoint=page(connections.confirm_revoke, signed_in=True),
            methods=["GET"],
        ),
        Route(
            f"{connections.PATH}/{{grant_id}}/revoke",
            endpoint=page(connections.revoke, signed_in=True),
            methods=["POST"],
        ),
        Route(approvals.PATH, endpoint=page(approvals.inbox, signed_in=True), methods=["GET"]),
        Route(
            f"{approvals.PATH}/{{approval_id}}",
            endpoint=page(approvals.show, signed_in=True),
            methods=["GET"],
        ),
        Route(
            f"{approvals.PATH}/{{approval_id}}/options",
            endpoint=page(approvals.decision_options, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{approvals.PATH}/{{approval_id}}/verify",
            endpoint=page(approvals.decision_verify, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{policy_changes.PATH}/{{request_id}}",
            endpoint=page(policy_changes.show, signed_in=True),
            methods=["GET"],
        ),
        Route(
            f"{policy_changes.PATH}/{{request_id}}/options",
            endpoint=page(policy_changes.decision_options, signed_in=True, json=True),
            methods=["POST"],
        ),
        Route(
            f"{policy_changes.PATH}/{{request_id}}/verify",
            endpoint=page(policy_changes.decision_verify, signed_in=True, json=True),
            methods=["POST"],
        ),
        # The dashboard's agent pages.
        Route(f"{agents.PATH}/{{agent_id}}", endpoint=page(agents.show, signed_in=True), methods=["GET"]),
        Route(
            f"{agents.PATH}/{{agent_id}}/policy",
            endpoint=page(agents.change_policy, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{agents.PATH}/{{agent_id}}/tokens",
            endpoint=page(agents.issue_token, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{agents.PATH}/{{agent_id}}/tokens/{{token_id}}/revoke",
            endpoint=page(agents.confirm_revoke, signed_in=True),
            methods=["GET"],
        ),
        Route(
            f"{agents.PATH}/{{agent_id}}/tokens/{{token_id}}/revoke",
            endpoint=page(agents.revoke, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{agents.PATH}/{{agent_id}}/disable",
            endpoint=page(agents.disable, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{agents.PATH}/{{agent_id}}/enable",
            endpoint=page(agents.enable, signed_in=True),
            methods=["POST"],
        ),
        *organisation_routes(),
        Route("/favicon.ico", endpoint=favicon, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
    ]


def organisation_routes() -> list[BaseRoute]:
    """The organisation's pages: members, the audit log, the settings and the admin API tokens."""
    return [
        Route(api_tokens.PATH, endpoint=page(api_tokens.show, signed_in=True), methods=["GET"]),
        Route(api_tokens.PATH, endpoint=page(api_tokens.issue, signed_in=True), methods=["POST"]),
        Route(
            f"{api_tokens.PATH}/{{token_id}}/revoke",
            endpoint=page(api_tokens.revoke, signed_in=True),
            methods=["POST"],
        ),
        Route(members.PATH, endpoint=page(members.show, signed_in=True), methods=["GET"]),
        Route(f"{members.PATH}/invite", endpoint=page(members.invite, signed_in=True), methods=["POST"]),
        Route(
            f"{members.PATH}/{{member_id}}/role",
            endpoint=page(members.change_role, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{members.PATH}/{{member_id}}/disable",
            endpoint=page(members.disable, signed_in=True),
            methods=["POST"],
        ),
        Route(
            f"{members.PATH}/{{member_id}}/enable",
            endpoint=page(members.enable, signed_in=True),
            methods=["POST"],
        ),
        Route(audit_log.PATH, endpoint=page(audit_log.show, signed_in=True), methods=["GET"]),
        Route(org_settings.PATH, endpoint=page(org_settings.show, signed_in=True), methods=["GET"]),
        Route(
            f"{org_settings.PATH}/ttl", endpoint=page(org_settings.set_ttl, signed_in=True), methods=["POST"]
        ),
        Route(
            f"{org_settings.PATH}/slack",
            endpoint=page(org_settings.set_slack, signed_in=True),
            methods=["POST"],
        ),
    ]
