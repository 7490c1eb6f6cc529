"""What a passkey signs when a member decides an approval.

The WebAuthn challenge of a decision is not random: it is SHA-256 over a canonical encoding of the
decision (approve or deny), the approval's id and the payment it covers (amount in atomic units,
asset, payee, network, host, resource) and a single-use nonce the server keeps in the database.
When the answer comes back, the server recomputes the challenge from the approval's row and the
stored nonce, so an assertion over any other amount, payee or decision does not verify, and the
nonce is used up atomically before the assertion is checked, so one assertion cannot be replayed.

A decision on a policy change an agent asked for is bound the same way, under its own domain
label: approve or reject, the request's id, its organisation and agent, the SHA-256 of the change
as stored (recomputed from the row, never read from a column), the versions it would change as
they are in force (`basis`: the agent's policy version and each named rule's), and the nonce. An
edited change, or a policy or rule changed since the challenge was made, does not verify.

The encoding is a domain label followed by each field as a 4-byte big-endian length and its UTF-8
bytes: no field can run into the next, and two different decisions never encode alike.
"""

from __future__ import annotations

import hashlib
import secrets
import struct

from server.models import Approval, PolicyChangeRequest

DOMAIN = b"paywarden/approval-decision/v1"
POLICY_CHANGE_DOMAIN = b"paywarden/policy-change-decision/v1"
NONCE_BYTES = 32


def new_nonce() -> bytes:
    return secrets.token_bytes(NONCE_BYTES)


def _field(value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return struct.pack(">I", len(data)) + data


def _encoded(domain: bytes, fields: list[str | bytes]) -> bytes:
    return domain + b"".join(_field(item) for item in fields)


def canonical(
    *,
    approval_id: str,
    approve: bool,
    amount_atomic: int,
    asset: str,
    pay_to: str,
    network: str,
    host: str,
    resource: str,
    nonce: bytes,
) -> bytes:
    """The bytes a decision's challenge is the hash of (addresses in lower case)."""
    fields: list[str | bytes] = [
        "approve" if approve else "deny",
        approval_id,
        str(int(amount_atomic)),
        asset.lower(),
        pay_to.lower(),
        network,
        host,
        resource,
        nonce,
    ]
    return _encoded(DOMAIN, fields)


def challenge_for(approval: Approval, *, approve: bool, nonce: bytes) -> bytes:
    """The challenge a passkey must sign to approve (or deny) exactly this approval's payment."""
    encoded = canonical(
        approval_id=approval.id,
        approve=approve,
        amount_atomic=approval.amount_atomic,
        asset=approval.asset,
        pay_to=approval.pay_to,
        network=approval.network,
        host=approval.host,
        resource=approval.resource,
        nonce=nonce,
    )
    return hashlib.sha256(encoded).digest()


def change_hash(change_json: str) -> str:
    """The SHA-256 (hex) of a stored change, as its request was made with it."""
    return hashlib.sha256(change_json.encode()).hexdigest()


def policy_change_canonical(
    *,
    request_id: str,
    approve: bool,
    org_id: str,
    agent_id: str,
    change_sha256: str,
    basis: str,
    nonce: bytes,
) -> bytes:
    """The bytes a policy change decision's challenge is the hash of."""
    fields: list[str | bytes] = [
        "approve" if approve else "reject",
        request_id,
        org_id,
        agent_id,
        change_sha256,
        basis,
        nonce,
    ]
    return _encoded(POLICY_CHANGE_DOMAIN, fields)


def policy_change_challenge_for(
    request: PolicyChangeRequest, *, approve: bool, basis: str, nonce: bytes
) -> bytes:
    """The challenge a passkey must sign to approve (or reject) exactly this change, over the
    versions in `basis`."""
    encoded = policy_change_canonical(
        request_id=request.id,
        approve=approve,
        org_id=request.org_id,
        agent_id=request.agent_id,
        change_sha256=change_hash(request.change_json),
        basis=basis,
        nonce=nonce,
    )
    return hashlib.sha256(encoded).digest()
