"""A local stand-in for Coinbase's CDP API: what cdp-sdk 1.51 sends for EVM server accounts and the
Policy Engine, answered as CDP documents it, so Paywarden's `cdp` wallets run here for real.

What it answers (request and answer shapes are cdp-sdk's own models: every body it reads is parsed
with them and every answer it gives is checked with them before it leaves, so an answer the SDK
could not read fails here first):

- `POST /v2/evm/accounts`, `GET /v2/evm/accounts/by-name/{name}`, `GET /v2/evm/accounts/{address}`,
  `PUT /v2/evm/accounts/{address}` (name, `accountPolicy`);
- `POST /v2/evm/accounts/{address}/sign/typed-data`, and, so a test can show CDP refusing what
  Paywarden never asks for, `.../sign` (a hash), `.../sign/message`, `.../sign/transaction` and
  `.../send/transaction` (evaluated, never broadcast);
- `POST /v2/policy-engine/policies`, `GET` and `PUT /v2/policy-engine/policies/{id}`.

Every request must carry a bearer JWT signed with the API key the stand-in was given (kid and
`sub` the key's id, `iss` "cdp", `uris` the request's own method, host and path, at most 120 seconds
valid), and where the SDK sends one (POST, PUT and DELETE under `/accounts`), an `X-Wallet-Auth`
JWT signed with the wallet secret whose `reqHash` is the SHA-256 of the sorted JSON body, each
`jti` used once. `X-Idempotency-Key` replays the first answer; the same key with another body is
refused.

Each account holds a private key of its own and signs EIP-712, hashes, messages and transactions
with it. Before signing, the Policy Engine decides as CDP documents it: the project's policy first,
then the account's; in each, the first rule for the operation whose criteria all hold decides, and a
request no rule matches is refused (an account with no policy at all signs). An `evmTypedDataField`
criterion holds only when the message's types match the criterion's (its primary type and the
structs it uses; the domain's type aside) before any condition is checked. A refusal is CDP's
`403 policy_violation`. Criteria this stand-in cannot evaluate (`evmData`, `netUSDChange`, ...) fail
the request loudly rather than guess.

Tests can take it down (`down`: 503), make it hang past a client's timeout (`stall_s`), change a
policy behind Paywarden's back (`tamper`), and read what it was asked (`requests`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio
import jwt
import rlp
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from eth_account import Account
from eth_account.messages import encode_defunct
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from server.signers.cdp_credentials import CdpCredentials
from tests.support.local_server import serve_asgi

BASE_PATH = "/platform"
MAX_JWT_LIFETIME_S = 120
CLOCK_SKEW_S = 30
ERROR_LINK = "https://docs.cdp.coinbase.com/api-v2/docs/errors"
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")


# -- credentials --------------------------------------------------------------------------------


def new_credentials(*, ec_api_key: bool = False) -> CdpCredentials:
    """An API key (Ed25519 in base64, as CDP issues them, or an EC key in PEM) and a wallet secret
    (a P-256 key, DER in base64), made fresh."""
    if ec_api_key:
        key = ec.generate_private_key(ec.SECP256R1())
        secret = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        ).decode()
    else:
        signing = ed25519.Ed25519PrivateKey.generate()
        seed = signing.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        public = signing.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        secret = base64.b64encode(seed + public).decode()
    wallet = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return CdpCredentials(
        api_key_id=f"organizations/{uuid.uuid4()}/apiKeys/{uuid.uuid4()}",
        api_key_secret=secret,
        wallet_secret=base64.b64encode(wallet).decode(),
    )


def _api_public_key(secret: str) -> Any:
    if "BEGIN" in secret:
        return serialization.load_pem_private_key(
            secret.replace("\\n", "\n").encode(), password=None
        ).public_key()
    seed = base64.b64decode(secret)[:32]
    return ed25519.Ed25519PrivateKey.from_private_bytes(seed).public_key()


def _wallet_public_key(secret: str) -> Any:
    return serialization.load_der_private_key(base64.b64decode(secret), password=None).public_key()


# -- state --------------------------------------------------------------------------------------


class CdpFailure(Exception):
    """An error answer, in CDP's shape."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


def _now_iso() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


@dataclass
class StoredAccount:
    address: str
    name: str | None
    key: bytes = field(repr=False)
    policy_id: str | None
    created_at: str
    updated_at: str


@dataclass
class StoredPolicy:
    id: str
    scope: str
    description: str | None
    rules: list[dict[str, Any]]
    created_at: str
    updated_at: str
    status: str = "active"

    def document(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "scope": self.scope,
            "status": self.status,
            "rules": self.rules,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
        }
        if self.description is not None:
            out["description"] = self.description
        return out


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    wallet_auth: bool
    status: int
    peer_port: int  # the client's port: requests over one connection share it


# -- the Policy Engine ----------------------------------------------------------------------------


def _compare(left: int, operator: str, right: int) -> bool:
    return {
        ">": left > right,
        "<": left < right,
        ">=": left >= right,
        "<=": left <= right,
        "==": left == right,
        "!=": left != right,
    }[operator]


def _in(value: str | None, operator: str, addresses: list[str]) -> bool:
    if value is None or not _ADDRESS.match(value):
        return False
    found = value.lower() in {address.lower() for address in addresses}
    return found if operator == "in" else not found


def _struct_types(types: dict[str, Any], primary: str) -> dict[str, Any]:
    """The primary type and every struct type it uses, by name (the domain's type aside)."""
    found: dict[str, Any] = {}
    pending = [primary]
    while pending:
        name = pending.pop()
        if name in found or name not in types:
            continue
        found[name] = [(f["name"], f["type"]) for f in types[name]]
        pending += [f["type"].split("[")[0] for f in types[name]]
    return found


def _field(message: dict[str, Any], path: str) -> Any:
    value: Any = message
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"0x[0-9a-fA-F]+|[0-9]+", value):
        return int(value, 0)
    return None


def _typed_field_holds(criterion: dict[str, Any], typed: dict[str, Any]) -> bool:
    wanted = criterion["types"]
    primary = wanted["primaryType"]
    if typed.get("primaryType") != primary:
        return False
    if _struct_types(typed.get("types", {}), primary) != _struct_types(wanted["types"], primary):
        return False
    message = typed.get("message", {})
    for condition in criterion["conditions"]:
        value = _field(message, condition["path"])
        if "addresses" in condition:
            held = _in(
                value if isinstance(value, str) else None, condition["operator"], condition["addresses"]
            )
        elif "value" in condition:
            number = _as_int(value)
            held = number is not None and _compare(number, condition["operator"], int(condition["value"]))
        else:
            held = value is not None and re.search(condition["match"], str(value)) is not None
        if not held:
            return False
    return True


def _criterion_holds(criterion: dict[str, Any], operation: str, request: dict[str, Any]) -> bool:
    kind = criterion["type"]
    if kind == "evmTypedDataVerifyingContract":
        contract = request.get("domain", {}).get("verifyingContract")
        return _in(contract, criterion["operator"], criterion["addresses"])
    if kind == "evmTypedDataField":
        return _typed_field_holds(criterion, request)
    if kind == "evmMessage":
        return re.search(criterion["match"], request["message"]) is not None
    if kind == "ethValue":
        return _compare(request["value"], criterion["operator"], int(criterion["ethValue"]))
    if kind == "evmAddress":
        return _in(request.get("to"), criterion["operator"], criterion["addresses"])
    raise CdpFailure(
        500, "internal_server_error", f"the stand-in cannot evaluate {kind!r} criteria of {operation}"
    )


def evaluate(policies: list[StoredPolicy], operation: str, request: dict[str, Any]) -> str:
    """'accept' or 'reject': each active policy in turn, the first matching rule of each deciding,
    no matching rule refusing; with no policy at all, CDP signs."""
    active = [policy for policy in policies if policy.status == "active"]
    for policy in active:
        decided = None
        for rule in policy.rules:
            if rule["operation"] != operation:
                continue
            if all(_criterion_holds(c, operation, request) for c in rule.get("criteria") or ()):
                decided = rule["action"]
                break
        if decided != "accept":
            return "reject"
    return "accept"


# -- the service --------------------------------------------------------------------------------


class CdpStandIn:
    """The stand-in's state and its ASGI app. `credentials` are the only ones it accepts."""

    def __init__(self, credentials: CdpCredentials | None = None) -> None:
        self.credentials = credentials or new_credentials()
        self._api_key = _api_public_key(self.credentials.api_key_secret)
        self._wallet_key = _wallet_public_key(self.credentials.wallet_secret)
        self.accounts: dict[str, StoredAccount] = {}  # by lower-case address
        self.policies: dict[str, StoredPolicy] = {}
        self.requests: list[SeenRequest] = []
        self.down = False
        self.stall_s = 0.0
        self._jtis: set[str] = set()
        self._idempotent: dict[tuple[str, str, str], tuple[str, int, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.app = Starlette(
            routes=[
                Route(f"{BASE_PATH}/v2/evm/accounts", self._accounts, methods=["POST"]),
                Route(
                    f"{BASE_PATH}/v2/evm/accounts/by-name/{{name}}", self._account_by_name, methods=["GET"]
                ),
                Route(f"{BASE_PATH}/v2/evm/accounts/{{address}}", self._account, methods=["GET", "PUT"]),
                Route(
                    f"{BASE_PATH}/v2/evm/accounts/{{address}}/sign/typed-data",
                    self._sign_typed_data,
                    methods=["POST"],
                ),
                Route(f"{BASE_PATH}/v2/evm/accounts/{{address}}/sign", self._sign_hash, methods=["POST"]),
                Route(
                    f"{BASE_PATH}/v2/evm/accounts/{{address}}/sign/message",
                    self._sign_message,
                    methods=["POST"],
                ),
                Route(
                    f"{BASE_PATH}/v2/evm/accounts/{{address}}/sign/transaction",
                    self._sign_transaction,
                    methods=["POST"],
                ),
                Route(
                    f"{BASE_PATH}/v2/evm/accounts/{{address}}/send/transaction",
                    self._send_transaction,
                    methods=["POST"],
                ),
                Route(f"{BASE_PATH}/v2/policy-engine/policies", self._create_policy, methods=["POST"]),
                Route(
                    f"{BASE_PATH}/v2/policy-engine/policies/{{policy_id}}",
                    self._policy,
                    methods=["GET", "PUT"],
                ),
            ]
        )

    # -- for tests ------------------------------------------------------------------------------

    def account_named(self, name: str) -> StoredAccount | None:
        return next((a for a in self.accounts.values() if a.name == name), None)

    def tamper(self, policy_id: str, change: Callable[[StoredPolicy], None]) -> None:
        """Change a policy as someone with the organisation's CDP key could, behind Paywarden."""
        with self._lock:
            change(self.policies[policy_id])

    def count(self, method: str, pattern: str) -> int:
        return sum(1 for r in self.requests if r.method == method and re.search(pattern, r.path))

    # -- the HTTP layer --------------------------------------------------------------------------

    async def _handle(
        self,
        request: Request,
        work: Callable[[dict[str, Any]], tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]],
    ) -> Response:
        """Authenticate, replay an idempotent answer, run `work(body)`, validate and record."""
        path = request.url.path
        wallet_auth = "x-wallet-auth" in request.headers
        status = 500
        try:
            if self.stall_s:
                await anyio.sleep(self.stall_s)
            if self.down:
                raise CdpFailure(503, "service_unavailable", "The stand-in is down.")
            raw = await request.body()
            body = json.loads(raw) if raw else {}
            self._authenticate(request, body)
            key = request.headers.get("x-idempotency-key")
            replay = self._replayed(request.method, path, key, raw)
            if replay is not None:
                status, document = replay
            else:
                with self._lock:
                    status, document, model = work(body)
                model(document)  # cdp-sdk must be able to read it
                if key is not None:
                    self._idempotent[(request.method, path, key)] = (
                        hashlib.sha256(raw).hexdigest(),
                        status,
                        document,
                    )
            return JSONResponse(document, status_code=status)
        except CdpFailure as failure:
            status = failure.status
            return JSONResponse(
                {
                    "errorType": failure.error_type,
                    "errorMessage": failure.message,
                    "correlationId": secrets.token_hex(8),
                    "errorLink": f"{ERROR_LINK}#{failure.error_type}",
                },
                status_code=failure.status,
            )
        finally:
            peer = request.client.port if request.client is not None else 0
            self.requests.append(SeenRequest(request.method, path, wallet_auth, status, peer))

    def _replayed(
        self, method: str, path: str, key: str | None, raw: bytes
    ) -> tuple[int, dict[str, Any]] | None:
        if key is None:
            return None
        seen = self._idempotent.get((method, path, key))
        if seen is None:
            return None
        if seen[0] != hashlib.sha256(raw).hexdigest():
            raise CdpFailure(422, "idempotency_error", "The idempotency key was used with another request.")
        return seen[1], seen[2]

    def _authenticate(self, request: Request, body: dict[str, Any]) -> None:
        uri = f"{request.method} {request.headers.get('host', '')}{request.url.path}"
        header = request.headers.get("authorization", "")
        if not header.startswith("Bearer "):
            raise CdpFailure(401, "unauthorized", "A bearer JWT is required.")
        token = header.removeprefix("Bearer ")
        try:
            head = jwt.get_unverified_header(token)
            if head.get("typ") != "JWT" or head.get("kid") != self.credentials.api_key_id:
                raise jwt.InvalidTokenError("not this API key")
            if not re.fullmatch(r"[0-9]{16}", str(head.get("nonce", ""))):
                raise jwt.InvalidTokenError("no nonce")
            claims = jwt.decode(
                token,
                self._api_key,
                algorithms=["EdDSA", "ES256"],
                options={"verify_aud": False, "require": ["sub", "iss", "nbf", "exp", "uris"]},
                leeway=CLOCK_SKEW_S,
            )
        except jwt.InvalidTokenError:
            raise CdpFailure(401, "unauthorized", "The bearer JWT is not valid.") from None
        if (
            claims["sub"] != self.credentials.api_key_id
            or claims["iss"] != "cdp"
            or claims["exp"] - claims["nbf"] > MAX_JWT_LIFETIME_S
            or claims["uris"] != [uri]
        ):
            raise CdpFailure(401, "unauthorized", "The bearer JWT is not for this request.")
        if self._needs_wallet_auth(request.method, request.url.path):
            self._check_wallet_auth(request.headers.get("x-wallet-auth"), uri, body)

    @staticmethod
    def _needs_wallet_auth(method: str, path: str) -> bool:
        # Where cdp-sdk 1.51 sends it (cdp/auth/utils/http.py) for the requests served here.
        return "/accounts" in path and method in ("POST", "PUT", "DELETE")

    def _check_wallet_auth(self, token: str | None, uri: str, body: dict[str, Any]) -> None:
        if token is None:
            raise CdpFailure(401, "unauthorized", "X-Wallet-Auth is required.")
        try:
            claims = jwt.decode(
                token,
                self._wallet_key,
                algorithms=["ES256"],
                options={"require": ["iat", "nbf", "jti", "uris"]},
            )
        except jwt.InvalidTokenError:
            raise CdpFailure(401, "unauthorized", "X-Wallet-Auth is not valid.") from None
        now = time.time()
        if claims["uris"] != [uri] or abs(now - claims["iat"]) > MAX_JWT_LIFETIME_S:
            raise CdpFailure(401, "unauthorized", "X-Wallet-Auth is not for this request.")
        if body:
            digest = hashlib.sha256(
                json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
            ).hexdigest()
            if claims.get("reqHash") != digest:
                raise CdpFailure(401, "unauthorized", "X-Wallet-Auth does not cover this body.")
        with self._lock:
            if claims["jti"] in self._jtis:
                raise CdpFailure(401, "unauthorized", "X-Wallet-Auth was already used.")
            self._jtis.add(claims["jti"])

    # -- accounts ---------------------------------------------------------------------------------

    def _account_document(self, account: StoredAccount) -> dict[str, Any]:
        document: dict[str, Any] = {
            "address": account.address,
            "policies": [p for p in [*self._project_policy_ids(), account.policy_id] if p is not None],
            "createdAt": account.created_at,
            "updatedAt": account.updated_at,
        }
        if account.name is not None:
            document["name"] = account.name
        return document

    def _project_policy_ids(self) -> list[str | None]:
        return [p.id for p in self.policies.values() if p.scope == "project"]

    def _existing_policy(self, policy_id: str | None) -> str | None:
        if policy_id and policy_id not in self.policies:
            raise CdpFailure(404, "not_found", "No policy has that id.")
        return policy_id or None

    async def _accounts(self, request: Request) -> Response:
        from cdp.openapi_client.models.create_evm_account_request import CreateEvmAccountRequest
        from cdp.openapi_client.models.evm_account import EvmAccount

        def create(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            asked = _parsed(CreateEvmAccountRequest, body)
            if asked.name is not None and self.account_named(asked.name) is not None:
                raise CdpFailure(409, "already_exists", "An account with that name exists.")
            key = secrets.token_bytes(32)
            address = str(Account.from_key(key).address)
            now = _now_iso()
            account = StoredAccount(
                address, asked.name, key, self._existing_policy(asked.account_policy), now, now
            )
            self.accounts[address.lower()] = account
            return 201, self._account_document(account), EvmAccount.from_dict

        return await self._handle(request, create)

    def _found(self, address: str) -> StoredAccount:
        account = self.accounts.get(address.lower())
        if account is None:
            raise CdpFailure(404, "not_found", "No account at that address.")
        return account

    async def _account_by_name(self, request: Request) -> Response:
        from cdp.openapi_client.models.evm_account import EvmAccount

        name = request.path_params["name"]

        def get(_body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            account = self.account_named(name)
            if account is None:
                raise CdpFailure(404, "not_found", "No account has that name.")
            return 200, self._account_document(account), EvmAccount.from_dict

        return await self._handle(request, get)

    async def _account(self, request: Request) -> Response:
        from cdp.openapi_client.models.evm_account import EvmAccount
        from cdp.openapi_client.models.update_evm_account_request import UpdateEvmAccountRequest

        address = request.path_params["address"]

        def get_or_update(
            body: dict[str, Any],
        ) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            account = self._found(address)
            if request.method == "PUT":
                asked = _parsed(UpdateEvmAccountRequest, body)
                if asked.name is not None:
                    account.name = asked.name
                if asked.account_policy is not None:
                    account.policy_id = self._existing_policy(asked.account_policy)
                account.updated_at = _now_iso()
            return 200, self._account_document(account), EvmAccount.from_dict

        return await self._handle(request, get_or_update)

    # -- signing ----------------------------------------------------------------------------------

    def _judged(self, address: str, operation: str, request: dict[str, Any]) -> StoredAccount:
        account = self._found(address)
        applicable = [p for p in self.policies.values() if p.scope == "project"]
        if account.policy_id is not None:
            applicable.append(self.policies[account.policy_id])
        if evaluate(applicable, operation, request) != "accept":
            raise CdpFailure(
                403,
                "policy_violation",
                "The request is forbidden due to violating at least one configured policy.",
            )
        return account

    async def _sign_typed_data(self, request: Request) -> Response:
        from cdp.openapi_client.models.eip712_message import EIP712Message
        from cdp.openapi_client.models.sign_evm_typed_data_with_end_user_account200_response import (
            SignEvmTypedDataWithEndUserAccount200Response as Answer,
        )

        def sign(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            _parsed(EIP712Message, body)
            account = self._judged(request.path_params["address"], "signEvmTypedData", body)
            try:
                signed = Account.from_key(account.key).sign_typed_data(full_message=body)
            except Exception as exc:
                raise CdpFailure(400, "invalid_request", f"The typed data cannot be signed: {exc}") from None
            return 200, {"signature": "0x" + bytes(signed.signature).hex()}, Answer.from_dict

        return await self._handle(request, sign)

    async def _sign_hash(self, request: Request) -> Response:
        from cdp.openapi_client.models.sign_evm_hash200_response import SignEvmHash200Response
        from cdp.openapi_client.models.sign_evm_hash_request import SignEvmHashRequest

        def sign(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            asked = _parsed(SignEvmHashRequest, body)
            account = self._judged(request.path_params["address"], "signEvmHash", body)
            signed = Account.from_key(account.key).unsafe_sign_hash(
                bytes.fromhex(asked.hash.removeprefix("0x"))
            )
            return 200, {"signature": "0x" + bytes(signed.signature).hex()}, SignEvmHash200Response.from_dict

        return await self._handle(request, sign)

    async def _sign_message(self, request: Request) -> Response:
        from cdp.openapi_client.models.sign_evm_message_request import SignEvmMessageRequest
        from cdp.openapi_client.models.sign_evm_message_with_end_user_account200_response import (
            SignEvmMessageWithEndUserAccount200Response as Answer,
        )

        def sign(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            asked = _parsed(SignEvmMessageRequest, body)
            account = self._judged(request.path_params["address"], "signEvmMessage", body)
            signed = Account.from_key(account.key).sign_message(encode_defunct(text=asked.message))
            return 200, {"signature": "0x" + bytes(signed.signature).hex()}, Answer.from_dict

        return await self._handle(request, sign)

    async def _sign_transaction(self, request: Request) -> Response:
        from cdp.openapi_client.models.sign_evm_transaction_request import SignEvmTransactionRequest
        from cdp.openapi_client.models.sign_evm_transaction_with_end_user_account200_response import (
            SignEvmTransactionWithEndUserAccount200Response as Answer,
        )

        def sign(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            transaction = _transaction(_parsed(SignEvmTransactionRequest, body).transaction)
            account = self._judged(request.path_params["address"], "signEvmTransaction", transaction)
            signed = Account.from_key(account.key).sign_transaction(transaction)
            return 200, {"signedTransaction": "0x" + bytes(signed.raw_transaction).hex()}, Answer.from_dict

        return await self._handle(request, sign)

    async def _send_transaction(self, request: Request) -> Response:
        from cdp.openapi_client.models.send_evm_transaction_request import SendEvmTransactionRequest

        def send(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            transaction = _transaction(_parsed(SendEvmTransactionRequest, body).transaction)
            self._judged(request.path_params["address"], "sendEvmTransaction", transaction)
            raise CdpFailure(
                422, "invalid_request", "This stand-in evaluates sent transactions but sends none."
            )

        return await self._handle(request, send)

    # -- policies ---------------------------------------------------------------------------------

    async def _create_policy(self, request: Request) -> Response:
        from cdp.openapi_client.models.create_policy_request import CreatePolicyRequest
        from cdp.openapi_client.models.policy import Policy

        def create(body: dict[str, Any]) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            asked = _parsed(CreatePolicyRequest, body)
            if asked.scope == "project" and self._project_policy_ids():
                raise CdpFailure(409, "already_exists", "The project already has a policy.")
            now = _now_iso()
            policy = StoredPolicy(str(uuid.uuid4()), asked.scope, asked.description, body["rules"], now, now)
            self.policies[policy.id] = policy
            return 201, policy.document(), Policy.from_dict

        return await self._handle(request, create)

    async def _policy(self, request: Request) -> Response:
        from cdp.openapi_client.models.policy import Policy
        from cdp.openapi_client.models.update_policy_request import UpdatePolicyRequest

        policy_id = request.path_params["policy_id"]

        def get_or_update(
            body: dict[str, Any],
        ) -> tuple[int, dict[str, Any], Callable[[dict[str, Any]], Any]]:
            policy = self.policies.get(policy_id)
            if policy is None:
                raise CdpFailure(404, "not_found", "No policy has that id.")
            if request.method == "PUT":
                asked = _parsed(UpdatePolicyRequest, body)
                policy.rules = body["rules"]
                policy.description = asked.description
                policy.updated_at = _now_iso()
            return 200, policy.document(), Policy.from_dict

        return await self._handle(request, get_or_update)


def _parsed(model: Any, body: dict[str, Any]) -> Any:
    """The body read with cdp-sdk's own model of the request (400 when it does not fit)."""
    try:
        parsed = model.from_dict(body)
    except Exception as exc:
        raise CdpFailure(
            400, "invalid_request", f"The request does not fit {model.__name__}: {exc}"
        ) from None
    if parsed is None:
        raise CdpFailure(400, "invalid_request", "The request has no body.")
    return parsed


def _transaction(raw: str) -> dict[str, Any]:
    """An unsigned EIP-1559 transaction (type 2, as cdp-sdk serialises one) as eth-account's dict."""
    try:
        data = bytes.fromhex(raw.removeprefix("0x"))
        if data[:1] != b"\x02":
            raise ValueError("not an EIP-1559 transaction")
        fields = rlp.decode(data[1:])
        number = [int.from_bytes(bytes(f), "big") for f in fields[:5]]
        return {
            "type": 2,
            "chainId": number[0],
            "nonce": number[1],
            "maxPriorityFeePerGas": number[2],
            "maxFeePerGas": number[3],
            "gas": number[4],
            "to": "0x" + bytes(fields[5]).hex() if fields[5] else None,
            "value": int.from_bytes(bytes(fields[6]), "big"),
            "data": "0x" + bytes(fields[7]).hex(),
            "accessList": [],
        }
    except (ValueError, IndexError, rlp.exceptions.DecodingError) as exc:
        raise CdpFailure(400, "malformed_transaction", f"The transaction cannot be read: {exc}") from None


@contextmanager
def running_standin(credentials: CdpCredentials | None = None) -> Iterator[tuple[CdpStandIn, str]]:
    """The stand-in on a free loopback port: (it, its base URL for PAYWARDEN_CDP_API_URL)."""
    standin = CdpStandIn(credentials)
    with serve_asgi(standin.app) as port:
        yield standin, f"http://127.0.0.1:{port}{BASE_PATH}"
