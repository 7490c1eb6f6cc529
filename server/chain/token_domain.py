"""The EIP-712 domain a USDC-like token checks signatures against, read from the token itself.

A payment takes the domain's name and version from the seller's offer; a sweep has no offer, so
it asks the token: the name and version it declares (EIP-5267's `eip712Domain()` where it has one,
else `name()` and `version()`, which Circle's USDC has), kept only if they rebuild the token's own
`DOMAIN_SEPARATOR()` for this chain. A signature over that domain is one the token accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_hash.auto import keccak

from server.chain.rpc import JsonRpc, RpcError, RpcRefused

_DOMAIN_TYPE = keccak(b"EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")


def _selector(signature: bytes) -> str:
    return "0x" + keccak(signature).hex()[:8]


EIP712_DOMAIN = _selector(b"eip712Domain()")
DOMAIN_SEPARATOR = _selector(b"DOMAIN_SEPARATOR()")
NAME = _selector(b"name()")
VERSION = _selector(b"version()")


class DomainNotDeclared(RpcError):
    """No name and version the token declares rebuild its domain separator."""


@dataclass(frozen=True)
class TokenDomain:
    name: str
    version: str


def domain_separator(domain: TokenDomain, *, chain_id: int, verifying_contract: str) -> bytes:
    contract = bytes.fromhex(verifying_contract.lower().removeprefix("0x"))
    return keccak(
        _DOMAIN_TYPE
        + keccak(domain.name.encode())
        + keccak(domain.version.encode())
        + chain_id.to_bytes(32, "big")
        + contract.rjust(32, b"\x00")
    )


def _string_at(data: bytes, head_word: int) -> str:
    """The ABI-encoded string whose offset is in word `head_word` of a return value."""
    offset = int.from_bytes(data[32 * head_word : 32 * head_word + 32], "big")
    length = int.from_bytes(data[offset : offset + 32], "big")
    if offset + 32 + length > len(data):
        raise RpcError("a string runs past the end of the answer")
    return data[offset + 32 : offset + 32 + length].decode("utf-8")


async def _call(rpc: JsonRpc, asset: str, selector: str) -> bytes | None:
    """The raw return value of a view call, or None when the token has no such function."""
    try:
        result = await rpc.call("eth_call", [{"to": asset, "data": selector}, "latest"])
    except RpcRefused:
        return None  # a revert: the token does not have it
    if not isinstance(result, str) or not result.startswith("0x"):
        raise RpcError("eth_call returned no hex")
    return bytes.fromhex(result[2:]) or None


async def _declared(rpc: JsonRpc, asset: str) -> list[TokenDomain]:
    declared: list[TokenDomain] = []
    described = await _call(rpc, asset, EIP712_DOMAIN)
    if described is not None and len(described) >= 96:
        declared.append(TokenDomain(_string_at(described, 1), _string_at(described, 2)))
    name, version = await _call(rpc, asset, NAME), await _call(rpc, asset, VERSION)
    if name is not None and version is not None:
        declared.append(TokenDomain(_string_at(name, 0), _string_at(version, 0)))
    return declared


async def token_domain(rpc: JsonRpc, *, asset: str, chain_id: int) -> TokenDomain:
    """The token's EIP-712 name and version, proven by its domain separator. Raises RpcError
    (DomainNotDeclared when the token answers but nothing it declares matches)."""
    separator = await _call(rpc, asset, DOMAIN_SEPARATOR)
    for domain in await _declared(rpc, asset):
        if separator == domain_separator(domain, chain_id=chain_id, verifying_contract=asset):
            return domain
    raise DomainNotDeclared(f"no EIP-712 domain the token {asset} declares matches its separator")
