"""Drive Paywarden's authorization server and pages from Python, without a browser.

`SoftBrowser` is a cookie-keeping HTTP client with a software passkey (soft_authenticator.py): it
loads the real pages, reads their CSRF tokens, runs the passkey ceremonies the page's script would,
and posts the consent form. `pkce()` makes a verifier and its S256 challenge; `register()` is
dynamic client registration.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from auth.passkeys import reissue_enrollment
from server.kit.clock import Clock
from server.kit.db import Database
from server.settings import Settings
from server.tenancy.service import find_member
from server.vocabulary import Role
from tests.support.principals import OPERATOR
from tests.support.soft_authenticator import SoftAuthenticator
from tests.support.tenants import AgentSetup, make_agent, make_member

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_QUERY = re.compile(r'name="query" value="([^"]*)"')
_AGENT = re.compile(r'name="agent" id="agent-[^"]+" value="([^"]+)"')


@dataclass(frozen=True)
class Pkce:
    verifier: str
    challenge: str


class Deployed(Protocol):
    """A Paywarden the tests talk to: one server in a thread, or processes behind one URL."""

    @property
    def settings(self) -> Settings: ...

    @property
    def public_url(self) -> str: ...

    @property
    def clock(self) -> Clock:
        """The clock the server was given: what it stamps rows with, and judges them by."""
        ...


def pkce() -> Pkce:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return Pkce(verifier, challenge)


def csrf_of(page: str) -> str:
    found = _CSRF.search(page)
    assert found, "no CSRF token on the page"
    return html.unescape(found.group(1))


def query_of(location: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(location).query, keep_blank_values=True)


def register(server: Deployed, **metadata: Any) -> dict[str, Any]:
    body = {"redirect_uris": ["http://127.0.0.1/callback"], "token_endpoint_auth_method": "none", **metadata}
    response = httpx.post(f"{server.public_url}/oauth/register", json=body, timeout=10)
    assert response.status_code == 201, response.text
    document: dict[str, Any] = response.json()
    return document


def enroll_token(enroll_url: str) -> str:
    return enroll_url.rsplit("/", 1)[-1]


class SoftBrowser:
    """One person's browser: cookies, and a passkey authenticator for the pages' origin."""

    def __init__(self, server: Deployed) -> None:
        self.server = server
        origin = server.settings.pages_origin
        self.http = httpx.Client(base_url=origin, follow_redirects=False, timeout=15)
        self.authenticator = SoftAuthenticator(origin)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> SoftBrowser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def ceremony(self, page_path: str, options: str, verify: str, **extra: Any) -> httpx.Response:
        """What passkeys.js does: ask for options, answer with the authenticator, post the answer."""
        page = self.http.get(page_path)
        assert page.status_code == 200, page.text
        csrf = csrf_of(page.text)
        started = self.http.post(options, json={"csrf": csrf})
        assert started.status_code == 200, started.text
        body = started.json()
        creating = "user" in body["publicKey"]
        answer = (self.authenticator.register if creating else self.authenticator.authenticate)(
            body["publicKey"]
        )
        return self.http.post(
            verify, json={"csrf": csrf, "challengeId": body["challengeId"], "credential": answer, **extra}
        )

    def sudo(self, next_path: str = "/admin") -> httpx.Response:
        """Sudo mode as the sudo page makes it: a fresh, user-verified passkey assertion for this
        browser session, after which changes that widen authority are made for a few minutes."""
        done = self.ceremony(
            f"/account/sudo?next={next_path}", "/account/sudo/options", "/account/sudo/verify"
        )
        assert done.status_code == 200, done.text
        return done

    def step_up(self, csrf: str) -> httpx.Response:
        """What passkeys.js does before adding a passkey: answer a step-up with this browser's
        authenticator (a passkey the member already has); the answer holds the `stepUpId`."""
        started = self.http.post("/account/passkeys/step-up/options", json={"csrf": csrf})
        assert started.status_code == 200, started.text
        body = started.json()
        answer = self.authenticator.authenticate(body["publicKey"])
        return self.http.post(
            "/account/passkeys/step-up/verify",
            json={"csrf": csrf, "challengeId": body["challengeId"], "credential": answer},
        )

    def add_passkey(self, device: SoftAuthenticator, name: str | None = None) -> httpx.Response:
        """Add `device`'s passkey from the passkeys page: a step-up with this browser's current
        authenticator, then the registration with `device` (which stays this browser's)."""
        csrf = csrf_of(self.http.get("/account/passkeys").text)
        stepped = self.step_up(csrf)
        assert stepped.status_code == 200, stepped.text
        started = self.http.post(
            "/account/passkeys/options", json={"csrf": csrf, "stepUpId": stepped.json()["stepUpId"]}
        )
        assert started.status_code == 200, started.text
        body = started.json()
        self.authenticator = device
        answer = device.register(body["publicKey"])
        extra = {} if name is None else {"name": name}
        return self.http.post(
            "/account/passkeys/verify",
            json={"csrf": csrf, "challengeId": body["challengeId"], "credential": answer, **extra},
        )

    def enroll(self, token: str, name: str = "Soft key") -> httpx.Response:
        path = f"/enroll/{token}"
        response = self.ceremony(path, f"{path}/options", f"{path}/verify", name=name)
        assert response.status_code == 200, response.text
        return response

    def sign_in(self, next_path: str = "/admin") -> httpx.Response:
        return self.ceremony(f"/login?next={next_path}", "/login/options", "/login/verify", next=next_path)

    def authorize(self, params: dict[str, str] | list[tuple[str, str]]) -> httpx.Response:
        return self.http.get(f"/oauth/authorize?{urlencode(params)}")

    def consent(
        self,
        page: httpx.Response,
        *,
        decision: str = "allow",
        agent: str | None = None,
        scopes: list[str] | None = None,
        csrf: str | None = None,
        omit_csrf: bool = False,
    ) -> httpx.Response:
        """Answer a consent page: by default the first agent and every offered scope."""
        text = page.text
        query = _QUERY.search(text)
        assert query, f"not a consent page: {text[:400]}"
        offered = re.findall(r'name="scope" id="scope-\d+" value="([^"]+)"', text)
        first_agent = _AGENT.search(text)
        chosen_agent = agent or (first_agent.group(1) if first_agent else "")
        form: list[tuple[str, str]] = (
            [] if omit_csrf else [("csrf", csrf if csrf is not None else csrf_of(text))]
        )
        form += [
            ("query", html.unescape(query.group(1))),
            ("decision", decision),
            ("agent", chosen_agent),
        ]
        form += [("scope", scope) for scope in (offered if scopes is None else scopes)]
        return self.http.post(
            "/oauth/authorize",
            content=urlencode(form),
            headers={"Content-Type": "application/x-www-form-urlencoded"},
        )


@dataclass(frozen=True)
class Person:
    """An organisation with an agent and a member who enrolled a passkey in `browser`."""

    agent: AgentSetup
    member_id: str
    browser: SoftBrowser


def enrollment_link_token(db: Database, member_id: str, org_id: str, *, clock: Clock) -> str:
    """A fresh one-time enrolment token for a member (as `admin member create` prints one), issued
    at the time of `clock`, the clock of the server that will be asked to honour it."""
    with db.write() as session:
        member = find_member(session, OPERATOR, member_id, org_id=org_id)
        return reissue_enrollment(session, member=member, actor="test", now=clock.now()).token


def enrolled_person(
    server: Deployed,
    db: Database,
    *,
    role: Role = Role.OWNER,
    org_id: str | None = None,
    own_agent: bool = False,
) -> Person:
    """A new agent (in a new organisation unless `org_id`), a member of its organisation, and that
    member's browser, enrolled with a passkey and signed in. With `own_agent` the agent is the
    member's own (they are its person)."""
    agent = make_agent(
        db,
        server.settings,
        allow_hosts=["api.example.com"],
        org_id=org_id,
        name=f"agent-{secrets.token_hex(3)}",
    )
    member_id = make_member(db, agent.org_id, role=role)
    if own_agent:
        agent = make_agent(
            db,
            server.settings,
            allow_hosts=["api.example.com"],
            org_id=agent.org_id,
            member_id=member_id,
            name=f"own-{secrets.token_hex(3)}",
        )
    browser = SoftBrowser(server)
    browser.enroll(enrollment_link_token(db, member_id, agent.org_id, clock=server.clock))
    return Person(agent, member_id, browser)


CALLBACK = "http://127.0.0.1:53682/callback"


def authorization_params(
    client_id: str,
    challenge: Pkce,
    *,
    redirect_uri: str = CALLBACK,
    state: str = "state-1",
    scope: str | None = None,
    resource: str | None = None,
    method: str | None = "S256",
) -> list[tuple[str, str]]:
    params = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("state", state),
        ("code_challenge", challenge.challenge),
    ]
    if method is not None:
        params.append(("code_challenge_method", method))
    if scope is not None:
        params.append(("scope", scope))
    if resource is not None:
        params.append(("resource", resource))
    return params


def code_of(response: httpx.Response) -> str:
    assert response.status_code in (302, 303), response.text[:500]
    found = query_of(response.headers["location"])
    assert "code" in found, response.headers["location"]
    return found["code"][0]


def exchange(
    server: Deployed,
    client_id: str,
    code: str,
    verifier: str,
    *,
    redirect_uri: str = CALLBACK,
    resource: str | None = None,
    secret: str | None = None,
) -> httpx.Response:
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": redirect_uri,
        "client_id": client_id,
        "code_verifier": verifier,
    }
    if resource is not None:
        form["resource"] = resource
    auth = (client_id, secret) if secret else None
    return httpx.post(f"{server.public_url}/oauth/token", data=form, auth=auth, timeout=15)


def refresh_with(
    server: Deployed, client_id: str, refresh_token: str, *, base_url: str | None = None, **extra: str
) -> httpx.Response:
    form = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **extra}
    return httpx.post(f"{base_url or server.public_url}/oauth/token", data=form, timeout=15)


def connect(
    server: Deployed,
    person: Person,
    *,
    client: dict[str, Any] | None = None,
    scopes: list[str] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Register (unless given a client), authorize, consent and exchange: (client, token response)."""
    client = client or register(server, client_name="Test client")
    challenge = pkce()
    page = person.browser.authorize(authorization_params(client["client_id"], challenge))
    assert page.status_code == 200, page.text[:500]
    code = code_of(person.browser.consent(page, scopes=scopes))
    answer = exchange(server, client["client_id"], code, challenge.verifier)
    assert answer.status_code == 200, answer.text
    return client, answer.json()


def mcp_post(
    url: str, token: str, message: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    """One JSON-RPC message to /mcp, as a streamable-HTTP client sends it."""
    return httpx.post(
        url,
        json=message,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-11-25",
            **(headers or {}),
        },
        timeout=30,
    )


def rpc_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message in a response, whether plain JSON or one server-sent event."""
    assert response.status_code == 200, (response.status_code, response.text[:500])
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = data[-1]
    message: dict[str, Any] = json.loads(text)
    return message


def call_tool(url: str, token: str, name: str, arguments: dict[str, Any] | None = None) -> httpx.Response:
    return mcp_post(
        url,
        token,
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments or {}},
        },
    )
