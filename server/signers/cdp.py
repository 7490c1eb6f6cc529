"""The `cdp` signer: the key stays at Coinbase CDP, in an EVM server account of the organisation,
and CDP signs the typed data `PaymentSigner` built (and checked) through its sign-typed-data call.

CDP's own Policy Engine then judges the request again against the account's policy, compiled from
the agent's (server/wallet_policies/): a refusal there is `cdp_policy_refused`. The request carries
an idempotency key derived from the authorisation's nonce (itself derived from the intent), so a
request repeated after a lost answer gets the same signature back, never a second one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from server.kit.clock import Clock
from server.signers.base import PaymentSigner
from server.signers.cdp_api import CdpSession, sdk_loaded
from server.signers.errors import CdpUnavailable

if TYPE_CHECKING:
    from cdp import CdpClient

_SIGNATURE = re.compile(r"^0x[0-9a-fA-F]{130}$")


def wire_typed_data(typed: Mapping[str, Any]) -> dict[str, Any]:
    """EIP-712 typed data as JSON carries it: byte strings as 0x-hex, integers as decimal strings
    (uint256 values do not fit every JSON reader's numbers)."""

    def value(item: Any) -> Any:
        if isinstance(item, bytes):
            return "0x" + item.hex()
        if isinstance(item, int) and not isinstance(item, bool):
            return str(item)
        return item

    return {**typed, "message": {key: value(item) for key, item in typed["message"].items()}}


class CdpSigner(PaymentSigner):
    mode = "cdp"

    def __init__(
        self, session: CdpSession, *, address: str, usdc_by_network: Mapping[str, str], clock: Clock
    ) -> None:
        super().__init__(usdc_by_network=usdc_by_network, clock=clock)
        self._session = session
        self._address = address

    @property
    def address(self) -> str:
        return self._address

    async def _sign_typed_data(self, typed: dict[str, Any]) -> str:
        await sdk_loaded()
        from cdp.openapi_client.models.eip712_domain import EIP712Domain
        from cdp.utils import create_deterministic_uuid_v4

        wire = wire_typed_data(typed)
        domain = EIP712Domain.from_dict(wire["domain"])
        idempotency_key = create_deterministic_uuid_v4(wire["message"]["nonce"], "paywarden-sign")

        async def sign(client: CdpClient) -> object:
            return await client.evm.sign_typed_data(
                address=self._address,
                domain=domain,
                types=wire["types"],
                primary_type=wire["primaryType"],
                message=wire["message"],
                idempotency_key=idempotency_key,
            )

        signature = await self._session.call(sign)
        if not isinstance(signature, str) or not _SIGNATURE.match(signature):
            raise CdpUnavailable(cdpError="unreadable_answer")
        return signature
