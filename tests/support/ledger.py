"""Purchases without a seller: the facts a reservation needs, built by hand, for ledger tests."""

from __future__ import annotations

from datetime import datetime

from server.kit.db import Database
from server.models import Agent
from server.payments.ledger import PurchaseFacts, Reservation, authorize_held, reserve
from server.tenancy.service import get_agent
from server.vocabulary import WalletMode
from server.x402.challenge import Offer
from server.x402.selection import Selection
from tests.support.principals import OPERATOR

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAYEE = "0x1111111111111111111111111111111111111111"
PAYER = "0x9999999999999999999999999999999999999999"
CENT = 10_000


def facts(
    key: str,
    *,
    host: str = "api.example.com",
    path: str = "/v1/search",
    amount: int = CENT,
    pay_to: str = PAYEE,
    network: str = "eip155:84532",
    fingerprint: str = "f" * 64,
    asset: str = USDC,
    payer: str = PAYER,
) -> PurchaseFacts:
    offer = Offer(
        {
            "scheme": "exact",
            "network": network,
            "asset": asset,
            "amount": str(amount),
            "payTo": pay_to,
            "maxTimeoutSeconds": 60,
            "extra": {"name": "USDC", "version": "2"},
        }
    )
    selection = Selection(offer, network, asset, pay_to, amount, "USDC", "2", 60)
    return PurchaseFacts(
        idempotency_key=key,
        fingerprint=fingerprint,
        method="GET",
        host=host,
        path=path,
        resource=f"https://{host}{path}",
        origin=None,
        x402_version=2,
        resource_host=host,
        selection=selection,
        payer=payer,
        wallet_mode=WalletMode.LOCAL_KEY,
    )


def agent_of(db: Database, agent_id: str) -> Agent:
    with db.read() as session:
        return get_agent(session, OPERATOR, agent_id)


def reserve_now(db: Database, agent_id: str, purchase: PurchaseFacts, now: datetime) -> Reservation:
    with db.write() as session:
        agent = get_agent(session, OPERATOR, agent_id)
        return reserve(session, OPERATOR, agent=agent, facts=purchase, now=now)


def authorize_held_now(
    db: Database, agent_id: str, intent_id: str, purchase: PurchaseFacts, now: datetime
) -> Reservation:
    with db.write() as session:
        agent = get_agent(session, OPERATOR, agent_id)
        return authorize_held(session, OPERATOR, agent=agent, intent_id=intent_id, facts=purchase, now=now)
