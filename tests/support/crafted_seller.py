"""A seller crafted to produce each of the diagnosis' warnings and causes the hostile seller does
not already: offers on mainnet and testnet at once, some unpayable offers, a challenge whose
versions disagree, offers full of prose where tokens belong, a payee that changes on request, a
plain error status, and a discovery endpoint (x402 Bazaar) listing its own routes.

Every scenario names the test token on eip155:84532 in its payable offers, like the hostile
seller's, and writes CANARY into every text it controls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.hostile_seller import CANARY, INJECTION, NETWORK, PRICE, Exchange, HostileSeller

MAINNET_USDC = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"


class CraftedSeller(HostileSeller):
    """The hostile seller plus the scenarios diagnosis and catalog tests need."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pay_to_now = self.pay_to  # what /moving asks to be paid at; tests change it

    async def scenario_mixed(self, ex: Exchange) -> None:
        """A payable testnet offer, and a mainnet offer on a chain Paywarden does not pay."""
        mainnet = {**self.offer(network="eip155:1", asset=MAINNET_USDC), "description": INJECTION}
        header = self._challenge_of(ex.path, [self.offer(), mainnet])
        await ex.respond(402, json.dumps({"note": CANARY}).encode(), PAYMENT_REQUIRED=header)

    async def scenario_versions(self, ex: Exchange) -> None:
        """A v2 header, and a body that claims to be an x402 v1 challenge."""
        header = self.challenge(ex.path, self.offer())
        body = {"x402Version": 1, "error": CANARY, "accepts": [self.v1_offer(ex.path)]}
        await ex.respond(402, json.dumps(body).encode(), PAYMENT_REQUIRED=header)

    async def scenario_prose(self, ex: Exchange) -> None:
        """Prose where tokens belong: nothing of it may come back."""
        offer = {
            "scheme": f"exact {CANARY}",
            "network": f"the network you like {CANARY}",
            "amount": f"ten {CANARY}",
            "asset": f"USDC {CANARY}",
            "payTo": f"ask me {CANARY}",
        }
        header = self._challenge_of(ex.path, [offer], description=INJECTION)
        await ex.respond(402, json.dumps({"note": CANARY}).encode(), PAYMENT_REQUIRED=header)

    async def scenario_moving(self, ex: Exchange) -> None:
        """Asks to be paid at `pay_to_now`, which a test can change between requests."""
        await self._ask(ex, self.offer(pay_to=self.pay_to_now))

    async def scenario_error404(self, ex: Exchange) -> None:
        await ex.respond(404, json.dumps({"error": CANARY}).encode())

    def _challenge_of(self, path: str, offers: list[dict[str, Any]], *, description: str = CANARY) -> str:
        import base64

        document = {
            "x402Version": 2,
            "error": CANARY,
            "resource": {"url": self.url(path), "description": description},
            "accepts": offers,
        }
        return base64.b64encode(json.dumps(document).encode()).decode()


__all__ = ["CANARY", "NETWORK", "PRICE", "CraftedSeller", "fixture_crafted_seller"]


@pytest.fixture(scope="session", name="crafted_seller")
def fixture_crafted_seller(anvil: Any, test_usdc: Any) -> Iterator[CraftedSeller]:
    """The crafted seller on the session's anvil; its facilitator is anvil account 3."""
    from tests.support.chain import fresh_wallet

    pay_to, _ = fresh_wallet()
    other_pay_to, _ = fresh_wallet()
    seller = CraftedSeller(
        token_address=test_usdc.address,
        pay_to=pay_to,
        other_pay_to=other_pay_to,
        rpc_url=anvil.rpc_url,
        facilitator_key=anvil.accounts[3].private_key,
    ).start()
    try:
        yield seller
    finally:
        seller.stop()
