"""Every query on agents' wallets (a wallet belongs to one agent; retired wallets stay), on the
master key's check value that guards their sealed keys, and on every value sealed with it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar

from sqlmodel import col, func, select

from server.kit.repository import Repository, TenantRepository
from server.models import MasterKeyCheck, Organization, SealedSecret, Wallet
from server.vocabulary import WalletMode
from server.wallets.sealed import SealedColumn


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

    def of_agent(self, *, org_id: str, agent_id: str) -> Sequence[Wallet]:
        """Every wallet the agent ever had, newest first: the current one, then the retired."""
        return self._all(
            self._statement()
            .where(Wallet.org_id == org_id, Wallet.agent_id == agent_id)
            .order_by(col(Wallet.created_at).desc(), col(Wallet.id).desc())
        )

    def active_cdp(self) -> Sequence[Wallet]:
        """Every `cdp` wallet in use, of every organisation, oldest first."""
        return self._all(
            self._statement()
            .where(Wallet.mode == WalletMode.CDP, col(Wallet.retired_at).is_(None))
            .order_by(col(Wallet.created_at), col(Wallet.id))
        )

    def retired_cdp(self, *, org_id: str | None = None, agent_id: str | None = None) -> Sequence[Wallet]:
        """Every retired `cdp` wallet, of every organisation (or of one agent), newest first."""
        retired = col(Wallet.retired_at).is_not(None)
        statement = self._statement().where(Wallet.mode == WalletMode.CDP, retired)
        if org_id is not None and agent_id is not None:
            statement = statement.where(Wallet.org_id == org_id, Wallet.agent_id == agent_id)
        return self._all(statement.order_by(col(Wallet.created_at).desc(), col(Wallet.id).desc()))

    def active_named(self, *, org_id: str, account_name: str) -> Wallet | None:
        """The organisation's wallet in use under that CDP account name, if any."""
        return self._first(
            self._statement().where(
                Wallet.org_id == org_id, Wallet.account_name == account_name, col(Wallet.retired_at).is_(None)
            )
        )

    def any_active_cdp(self) -> bool:
        """Whether any organisation has a `cdp` wallet in use."""
        statement = select(Wallet.id).where(Wallet.mode == WalletMode.CDP, col(Wallet.retired_at).is_(None))
        return self.session.exec(statement.limit(1)).first() is not None

    def locked(self, *, org_id: str, wallet_id: str) -> Wallet | None:
        """The wallet, locked to the end of the transaction (PostgreSQL; SQLite's writer is alone)."""
        return self._first(
            self._statement().where(Wallet.org_id == org_id, Wallet.id == wallet_id).with_for_update()
        )

    def retired_states(self, *, org_id: str, agent_id: str, address: str) -> Sequence[datetime | None]:
        """When each of the agent's wallets paying from `address` was retired (None: it is current)."""
        return self.session.exec(
            select(Wallet.retired_at).where(
                Wallet.org_id == org_id,
                Wallet.agent_id == agent_id,
                func.lower(Wallet.address) == address.lower(),
            )
        ).all()

    def current_with_address(self, address: str) -> Sequence[Wallet]:
        """Wallets of any organisation that pay from `address` now (one key imported twice)."""
        return self._all(
            self._statement().where(
                func.lower(Wallet.address) == address.lower(), col(Wallet.retired_at).is_(None)
            )
        )


class CdpCredentialsRepository(TenantRepository[Organization]):
    """An organisation's sealed CDP credentials (columns of its row)."""

    model = Organization
    org_column: ClassVar[str] = "id"

    def of(self, *, org_id: str) -> Organization | None:
        return self.session.get(Organization, org_id)


class MasterKeyCheckRepository(Repository[MasterKeyCheck]):
    """The one row that names the master key this database was set up with."""

    model = MasterKeyCheck

    def stored(self) -> MasterKeyCheck | None:
        return self.session.get(MasterKeyCheck, 1)

    def locked(self) -> MasterKeyCheck | None:
        """The row, locked for the rest of the transaction (PostgreSQL; SQLite's writer is alone)."""
        locking = select(MasterKeyCheck).where(MasterKeyCheck.id == 1).with_for_update()
        return self.session.exec(locking).first()

    def shared(self) -> MasterKeyCheck | None:
        """The row, share-locked for the rest of the transaction (PostgreSQL): a rotation, which
        locks it for update, waits for this transaction, or this one for the rotation's."""
        locking = select(MasterKeyCheck).where(MasterKeyCheck.id == 1).with_for_update(read=True)
        return self.session.exec(locking).first()

    def any_sealed_wallet(self) -> tuple[str, bytes] | None:
        """A wallet whose key is sealed with the master key (its id and sealed key), if the database
        holds one. Only these two columns are read: this runs on older schemas too, before `migrate`."""
        found = self.session.exec(
            select(Wallet.id, Wallet.sealed_secret).where(col(Wallet.sealed_secret).is_not(None)).limit(1)
        ).first()
        if found is None or found[1] is None:
            return None
        return found[0], bytes(found[1])


class SealedValueRepository(Repository[SealedSecret]):
    """The rows holding a value sealed with the master key, and the database's own sealed secrets."""

    model = SealedSecret

    def rows_sealed_in(self, column: SealedColumn) -> Sequence[Any]:
        """Every row whose `column` holds a sealed value, in primary-key order."""
        model: Any = column.model
        key = next(iter(model.__table__.primary_key.columns))
        return self.session.exec(
            select(model).where(col(getattr(model, column.sealed)).is_not(None)).order_by(key)
        ).all()

    def count_sealed_in(self, column: SealedColumn, *, other_than: str) -> int:
        """How many rows of `column` are not recorded as sealed with the key `other_than` names."""
        model: Any = column.model
        key_id = col(getattr(model, column.key_id))
        return len(
            self.session.exec(
                select(getattr(model, column.sealed)).where(
                    col(getattr(model, column.sealed)).is_not(None),
                    key_id.is_(None) | (key_id != other_than),
                )
            ).all()
        )

    def secret(self, name: str) -> SealedSecret | None:
        return self.session.get(SealedSecret, name)

    def organization_ids(self) -> list[str]:
        """Every organisation's id: each is told in its audit log that the master key was rotated."""
        return list(self.session.exec(select(Organization.id).order_by(col(Organization.id))).all())

    def secrets(self) -> Sequence[SealedSecret]:
        return self._all(self._statement().order_by(col(SealedSecret.name)))
