"""Every query on agents' wallets (a wallet belongs to one agent; retired wallets stay) and on the
master key's check value that guards their sealed keys."""

from __future__ import annotations

from typing import ClassVar

from sqlmodel import col, select

from server.kit.repository import Repository, TenantRepository
from server.models import MasterKeyCheck, Wallet


class WalletRepository(TenantRepository[Wallet]):
    model = Wallet
    agent_column: ClassVar[str | None] = "agent_id"

    def active_for_agent(self, *, org_id: str, agent_id: str) -> Wallet | None:
        """The agent's newest wallet that is not retired."""
        return self._first(
            self._statement()
            .where(Wallet.org_id == org_id, Wallet.agent_id == agent_id, col(Wallet.retired_at).is_(None))
            .order_by(col(Wallet.created_at).desc())
        )


class MasterKeyCheckRepository(Repository[MasterKeyCheck]):
    """The one row that names the master key this database was set up with."""

    model = MasterKeyCheck

    def stored(self) -> MasterKeyCheck | None:
        return self.session.get(MasterKeyCheck, 1)

    def any_sealed_wallet(self) -> Wallet | None:
        """A wallet whose key is sealed with the master key, if the database holds one."""
        return self.session.exec(
            select(Wallet).where(col(Wallet.sealed_secret).is_not(None)).limit(1)
        ).first()
