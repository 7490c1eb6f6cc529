"""What Paywarden asks of Coinbase CDP with one organisation's credentials, through cdp-sdk.

- **Nothing but the configured API.** cdp-sdk reports every call and every error to Coinbase's
  analytics endpoint unless two variables say no (cdp/analytics.py reads them at each call); this
  module sets both when it is loaded, before any call, whatever the environment said. Requests
  then go to `PAYWARDEN_CDP_API_URL` alone (tests/signers/test_cdp_network.py watches the sockets).
- **Bounded.** Every call, retries included, ends within `timeout_s` (the SDK's own default is five
  minutes); a call that does not is `cdp_unavailable`.
- **Three outcomes of a refusal.** CDP's Policy Engine refusing (`403 policy_violation`) is
  `cdp_policy_refused`; CDP out of reach, out of time or failing itself (5xx, 429) is
  `cdp_unavailable`; CDP refusing the request for another reason (credentials, an unknown
  account) is `cdp_refused`, with CDP's own error type when it is a plain code.
- **One client per call.** A CdpClient holds an HTTP session bound to the event loop it was made
  in; each call makes one and closes it, so no session outlives its loop or leaks between threads.

The SDK takes seconds to import (docs/performance.md), so it is loaded by the first call, in a
worker thread, not with this module (a server that has `cdp` wallets loads it ahead, at start).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from server.signers.cdp_credentials import CdpCredentials
from server.signers.errors import CdpError, CdpPolicyRefused, CdpRefused, CdpUnavailable

if TYPE_CHECKING:
    from cdp import CdpClient

# cdp-sdk sends usage and errors to Coinbase unless these are "true" (read at every call).
TELEMETRY_SWITCHES = {"DISABLE_CDP_USAGE_TRACKING": "true", "DISABLE_CDP_ERROR_REPORTING": "true"}
os.environ.update(TELEMETRY_SWITCHES)

CALL_TIMEOUT_S = 10.0
_PLAIN_CODE = re.compile(r"^[a-z][a-z0-9_]{0,59}$")
# CDP's own error types for trouble on its side (besides 5xx and 429 answers).
_UNAVAILABLE_TYPES = frozenset(
    {"timed_out", "service_unavailable", "bad_gateway", "internal_server_error", "rate_limit_exceeded"}
)

T = TypeVar("T")


def load_sdk() -> None:
    """Import cdp-sdk: seconds of CPU (docs/performance.md), so never on the event loop's thread."""
    import cdp  # noqa: F401


async def sdk_loaded() -> None:
    """cdp-sdk imported, in a worker thread the first time, so a server's other requests go on."""
    if "cdp" not in sys.modules:
        await anyio.to_thread.run_sync(load_sdk)


@dataclass(frozen=True)
class CdpAccount:
    """An EVM server account at CDP: its address, name, and the ids of the policies that apply."""

    address: str
    name: str | None
    policies: tuple[str, ...]


@dataclass(frozen=True)
class HeldPolicy:
    """A policy as CDP holds it, its rules as cdp-sdk's policy types dump them (the compiler's shape)."""

    id: str
    scope: str
    description: str | None
    status: str
    rules: tuple[dict[str, Any], ...]


class _Missing(Exception):
    """CDP answered 404: the thing asked for does not exist (some callers expect that)."""


def _code(text: object) -> str | None:
    return text if isinstance(text, str) and _PLAIN_CODE.match(text) else None


def mapped_error(exc: BaseException) -> CdpError:
    """The Paywarden error for what the SDK raised (the SDK's own words are never passed on)."""
    from cdp.openapi_client.errors import ApiError, NetworkError

    if isinstance(exc, TimeoutError):
        return CdpUnavailable(cdpError="timeout")
    if isinstance(exc, NetworkError):
        return CdpUnavailable(cdpError=_code(exc.error_type))
    if isinstance(exc, ApiError):
        status, kind = exc.http_code, _code(exc.error_type)
        if status == 403 and kind == "policy_violation":
            return CdpPolicyRefused()
        if status is None or status >= 500 or status == 429 or kind in _UNAVAILABLE_TYPES:
            return CdpUnavailable(cdpError=kind, httpStatus=status)
        return CdpRefused(cdpError=kind, httpStatus=status)
    return CdpUnavailable(cdpError="unreadable_answer")


def _new_client(credentials: CdpCredentials, api_url: str) -> CdpClient:
    from cdp import CdpClient

    return CdpClient(
        api_key_id=credentials.api_key_id,
        api_key_secret=credentials.api_key_secret,
        wallet_secret=credentials.wallet_secret,
        base_path=api_url,
    )


class CdpClientPool:
    """A server's CdpClients, one per organisation's credentials (and event loop), kept open so
    calls reuse their connections: a new client loads the trust store (about 50 ms of CPU) and a
    new connection to CDP costs a TLS handshake. `aclose` closes them as the server stops."""

    KEPT = 64  # clients at most; the one used least recently goes first

    def __init__(self) -> None:
        self._clients: OrderedDict[tuple[int, str], tuple[asyncio.AbstractEventLoop, CdpClient]] = (
            OrderedDict()
        )

    async def client(self, credentials: CdpCredentials, api_url: str) -> CdpClient:
        loop = asyncio.get_running_loop()
        key = (id(loop), hashlib.sha256(credentials.encode() + api_url.encode()).hexdigest())
        found = self._clients.get(key)
        if found is not None:
            self._clients.move_to_end(key)
            return found[1]
        client = _new_client(credentials, api_url)
        self._clients[key] = (loop, client)
        while len(self._clients) > self.KEPT:
            _, (owner, oldest) = self._clients.popitem(last=False)
            if owner is loop:
                await oldest.close()
        return client

    async def aclose(self) -> None:
        """Close the clients of the running loop (those of a loop gone are gone with it)."""
        loop = asyncio.get_running_loop()
        clients, self._clients = self._clients, OrderedDict()
        for owner, client in clients.values():
            if owner is loop:
                await client.close()


class CdpSession:
    """Calls to CDP with one organisation's credentials: through a server's pool of open clients,
    or (without one, as in a command) with a client of their own each."""

    def __init__(
        self,
        credentials: CdpCredentials,
        *,
        api_url: str,
        timeout_s: float = CALL_TIMEOUT_S,
        pool: CdpClientPool | None = None,
    ) -> None:
        self._credentials = credentials
        self._api_url = api_url
        self._timeout_s = timeout_s
        self._pool = pool

    @asynccontextmanager
    async def _client(self) -> AsyncIterator[CdpClient]:
        if self._pool is not None:
            yield await self._pool.client(self._credentials, self._api_url)
            return
        client = _new_client(self._credentials, self._api_url)
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True):
                await client.close()

    async def call(self, call: Callable[[CdpClient], Awaitable[T]], *, missing_ok: bool = False) -> T:
        """`call`'s result, within the time allowed, or the CdpError for what went wrong; with
        `missing_ok`, a 404 raises _Missing instead."""
        await sdk_loaded()
        from cdp.openapi_client.errors import ApiError

        try:
            with anyio.fail_after(self._timeout_s):
                async with self._client() as client:
                    try:
                        return await call(client)
                    except ApiError as exc:
                        if missing_ok and exc.http_code == 404:
                            raise _Missing() from None
                        raise
        except (_Missing, CdpError):
            raise
        except (TimeoutError, ApiError, OSError, ValueError) as exc:
            raise mapped_error(exc) from None
        except Exception as exc:
            # Anything else the SDK or its HTTP client raised: CDP's answer could not be used.
            if type(exc).__module__.split(".")[0] in ("cdp", "aiohttp", "aiohttp_retry", "pydantic"):
                raise mapped_error(exc) from None
            raise


class CdpAccounts(CdpSession):
    """An organisation's accounts and policies at CDP. Signing is the signer's alone
    (server/signers/cdp.py): nothing here signs."""

    async def account_named(self, name: str) -> CdpAccount | None:
        async def get(client: CdpClient) -> Any:
            return await client.evm.get_account(name=name)

        try:
            return _account(await self.call(get, missing_ok=True))
        except _Missing:
            return None

    async def account_at(self, address: str) -> CdpAccount | None:
        async def get(client: CdpClient) -> Any:
            return await client.evm.get_account(address=address)

        try:
            return _account(await self.call(get, missing_ok=True))
        except _Missing:
            return None

    async def create_account(self, name: str, *, policy_id: str) -> CdpAccount:
        """A new account named `name` under the policy; an account of that name made meanwhile (409)
        is fetched and put under the policy instead."""
        await sdk_loaded()
        from cdp.openapi_client.errors import ApiError

        async def create(client: CdpClient) -> Any:
            try:
                return await client.evm.create_account(name=name, account_policy=policy_id)
            except ApiError as exc:
                if exc.http_code != 409:
                    raise
            existing = await client.evm.get_account(name=name)
            return await _attach(client, existing.address, policy_id)

        return _account(await self.call(create))

    async def attach_policy(self, address: str, policy_id: str) -> CdpAccount:
        async def attach(client: CdpClient) -> Any:
            return await _attach(client, address, policy_id)

        return _account(await self.call(attach))

    async def create_policy(self, document: Mapping[str, Any], *, idempotency_key: str) -> HeldPolicy:
        await sdk_loaded()
        from cdp.policies.types import CreatePolicyOptions
        from cdp.utils import create_deterministic_uuid_v4

        options = CreatePolicyOptions.model_validate(document)

        async def create(client: CdpClient) -> Any:
            return await client.policies.create_policy(
                policy=options, idempotency_key=create_deterministic_uuid_v4(idempotency_key, "policy")
            )

        return _policy(await self.call(create))

    async def replace_rules(self, policy_id: str, document: Mapping[str, Any]) -> HeldPolicy:
        """The policy `policy_id` made to hold `document`'s description and rules (the request
        cdp-sdk's `update_policy` sends, made through its API client's own call)."""
        await sdk_loaded()
        from cdp.openapi_client.models.update_policy_request import UpdatePolicyRequest
        from cdp.policies.request_transformer import map_request_rules_to_openapi_format
        from cdp.policies.response_transformer import map_openapi_policy
        from cdp.policies.types import UpdatePolicyOptions

        options = UpdatePolicyOptions(description=document.get("description"), rules=document["rules"])
        request = UpdatePolicyRequest(
            description=options.description, rules=map_request_rules_to_openapi_format(options.rules)
        )

        async def put(client: CdpClient) -> Any:
            answer = await client.api_clients.policies.update_policy_with_http_info(
                policy_id=policy_id, update_policy_request=request
            )
            return map_openapi_policy(answer.data)

        return _policy(await self.call(put))

    async def policy(self, policy_id: str) -> HeldPolicy | None:
        async def get(client: CdpClient) -> Any:
            return await client.policies.get_policy_by_id(id=policy_id)

        try:
            return _policy(await self.call(get, missing_ok=True))
        except _Missing:
            return None


async def _attach(client: CdpClient, address: str, policy_id: str) -> Any:
    from cdp import UpdateAccountOptions

    return await client.evm.update_account(
        address=address, update=UpdateAccountOptions(account_policy=policy_id)
    )


def _account(account: Any) -> CdpAccount:
    return CdpAccount(
        address=str(account.address),
        name=account.name,
        policies=tuple(str(p) for p in account.policies or ()),
    )


def _policy(policy: Any) -> HeldPolicy:
    return HeldPolicy(
        id=str(policy.id),
        scope=str(policy.scope),
        description=policy.description,
        status=str(policy.status),
        rules=tuple(rule.model_dump(mode="json", exclude_none=True) for rule in policy.rules),
    )
