"""Every query on agents' wallets. A wallet belongs to one agent; retired wallets stay."""

from __future__ import annotations

from typing import ClassVar

from sqlmodel import col

from server.kit.repository import TenantRepository
from server.models import Wallet


class WalletRepository(TenantRepository[Wallet]):
    model = Wallet
    agent_column: ClassVar[str | None] = "agent_id"

    def active_for_agent(self, agent_id: str) -> Wallet | None:
        """The agent's newest wallet that is not retired."""
        return self.first(
            self.statement()
            .where(Wallet.agent_id == agent_id, col(Wallet.retired_at).is_(None))
            .order_by(col(Wallet.created_at).desc())
        )
