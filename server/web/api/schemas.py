"""The admin API's documents, as pydantic models: the handlers render through them and the OpenAPI
document is generated from them, so the two cannot disagree."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from server.kit.money import format_usd
from server.models import Agent, PaymentIntent


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentDocument(Document):
    id: str
    name: str
    network: str = Field(description="The CAIP-2 network the agent pays on.")
    teamId: str | None
    memberId: str | None = Field(description="The member the agent belongs to, if it is one's own.")
    createdAt: datetime
    disabled: bool

    @classmethod
    def of(cls, agent: Agent) -> AgentDocument:
        return cls(
            id=agent.id,
            name=agent.name,
            network=agent.network,
            teamId=agent.team_id,
            memberId=agent.member_id,
            createdAt=agent.created_at,
            disabled=agent.disabled_at is not None,
        )


class AgentList(Document):
    agents: list[AgentDocument]


class PaymentDocument(Document):
    id: str
    agentId: str
    status: str
    host: str
    resource: str = Field(description="The URL paid for, without its query string.")
    payTo: str
    amountAtomic: int = Field(description="USDC in its smallest unit (6 decimals).")
    amountUsd: str
    network: str
    transaction: str | None = Field(description="The transfer's hash, once found on chain.")
    failureCode: str | None
    createdAt: datetime

    @classmethod
    def of(cls, intent: PaymentIntent) -> PaymentDocument:
        return cls(
            id=intent.id,
            agentId=intent.agent_id,
            status=str(intent.status),
            host=intent.host,
            resource=intent.resource,
            payTo=intent.pay_to,
            amountAtomic=intent.amount_atomic,
            amountUsd=format_usd(intent.amount_atomic, atomic=True),
            network=intent.network,
            transaction=intent.tx_hash,
            failureCode=intent.failure_code,
            createdAt=intent.created_at,
        )


class PaymentPage(Document):
    payments: list[PaymentDocument]
    nextCursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class AuditVerification(Document):
    intact: bool
    brokenAtSeq: int | None = Field(description="The first link that does not verify, if any.")
    reason: str | None


class ProblemDocument(Document):
    type: str = Field(description="urn:paywarden:problem:<code>")
    title: str
    status: int
    detail: str
    code: str
