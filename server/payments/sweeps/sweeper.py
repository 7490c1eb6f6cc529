"""Running a sweep, from wherever an earlier run left it (records.py names each step).

For each retired wallet and network: the wallet's own payments that may still move are asked
about first (a sweep waits for them); then its balance is read and a sweep authorised for all of
it, or the open one taken up. Then the sweep is carried as far as it goes in this run:

- authorised: the wallet's signer signs it (through `sign_payment`, with the agent's current
  wallet read now; a `cdp` wallet's through CDP, whose sweep-only policy for the retired account
  judges it again), and the signature is recorded durably before anything is sent; one that can
  no longer be signed in its window is closed unsigned and a new one authorised; one CDP's policy
  refuses is closed unsigned (`sweep_refused_at_cdp`);
- signed: with a gas account, a transaction carrying it is signed, recorded durably, then sent;
  without one, the run stops and hands the operator the authorisation and its calldata;
- sent: the same transaction is sent again if the node does not know it, and its receipt waited
  for; one the node refuses (its gas account without ETH, say) is replaced, once per run, by one
  from this run's gas account: both carry the same authorisation, so only one can move money;
- every time, first: the chain's verdict on the authorisation (server/chain/evidence.py, as for a
  payment): used with the transfer it signed, deep enough, is `settled`; used otherwise is
  flagged; provably never usable again is `expired`, and a new sweep goes on from there.

Nothing here moves money twice: the authorisation's nonce is derived from the sweep, one sweep is
open per wallet and network, and each step is recorded before the next can leave the process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import anyio

from auth.principal import Principal
from server.chain.evidence import ChainVerdict, ExpectedTransfer, SettlementFinding
from server.chain.rpc import RpcError, RpcRefused
from server.chain.service import ChainService
from server.chain.submission import GasPayer, SignedTransaction
from server.chain.token_domain import DomainNotDeclared
from server.kit.clock import Clock
from server.kit.crypto import MasterKey
from server.kit.db import Database
from server.models import Wallet, WalletSweep
from server.payments.settlement.checks import SettlementChecker
from server.payments.sweeps import records
from server.payments.sweeps.errors import (
    ChainUnavailable,
    SweepNetworkUnavailable,
    SweepRefusedAtCdp,
    SweepSigningFailed,
    SweepTransactionRefused,
    TokenDomainUnknown,
)
from server.settings import Settings
from server.signers.authorisation import SIGNING_DELAY_SECONDS
from server.signers.errors import CdpError, CdpPolicyRefused, SignerError, SignRefused
from server.signers.intents import TransferRequest
from server.vocabulary import SweepStatus, WalletMode
from server.wallets.cdp import sealed_cdp_credentials
from server.wallets.service import CdpAccess, signer_for
from server.x402.transfer_authorization import CLOCK_SKEW_SECONDS, MIN_VALIDITY_SECONDS, transfer_calldata

POLL_SECONDS = 0.5

Outcome = Literal[
    "nothing_to_sweep",  # the wallet holds nothing on the network, and no sweep is open
    "settled",  # the transfer is on-chain, deep enough: done
    "confirming",  # on-chain, not yet under enough blocks when the wait ended: run again
    "awaiting_submission",  # signed; no gas account given: the operator sends the calldata
    "sent",  # the transaction is sent, not mined when the wait ended: run again
    "reverted",  # the transaction was mined but failed; nothing moved: run again once it lapsed
    "failed",  # the chain shows another transfer than the one signed (flagged)
]


@dataclass(frozen=True)
class SweepOutcome:
    wallet: Wallet
    network: str
    outcome: Outcome
    sweep: WalletSweep | None = None
    calldata: str | None = None  # what the operator sends to the token, when awaiting submission


class Sweeper:
    def __init__(
        self, *, db: Database, chain: ChainService, settings: Settings, master: MasterKey, clock: Clock
    ) -> None:
        self._db = db
        self._chain = chain
        self._settings = settings
        self._master = master
        self._clock = clock
        self._settlement = SettlementChecker(db=db, chain=chain, clock=clock)

    def networks(self) -> list[str]:
        """The networks a sweep can run on: an RPC and a USDC address configured for each."""
        return [network for network in self._chain.networks if self._settings.usdc_address(network)]

    async def sweep(
        self,
        principal: Principal,
        *,
        agent: str,
        wallet: str | None = None,
        network: str | None = None,
        gas_payer: GasPayer | None = None,
        wait_seconds: float = 60.0,
    ) -> list[SweepOutcome]:
        """Sweep the agent's retired wallets (or the one named) on every network it can (or the one
        named), each as far as it goes within `wait_seconds` of waiting on the chain."""
        networks = [network] if network is not None else self.networks()
        if not networks or any(name not in self.networks() for name in networks):
            raise SweepNetworkUnavailable(network=network)
        targets = await self._db.reading(records.sweep_targets, principal, agent_ref=agent, wallet_ref=wallet)
        deadline = time.monotonic() + wait_seconds
        outcomes = []
        for retired in targets.retired:
            for name in networks:
                outcomes.append(await self._sweep_one(principal, retired, name, gas_payer, deadline))
        return outcomes

    async def _sweep_one(
        self, principal: Principal, retired: Wallet, network: str, gas_payer: GasPayer | None, deadline: float
    ) -> SweepOutcome:
        # A sweep that ended without moving anything (lapsed, or no longer signable) is followed by
        # one new sweep of what is there now; one that ends so again is reported as it ended.
        ended: WalletSweep | None = None
        for _ in range(2):
            sweep = await self._db.reading(
                records.open_sweep, principal, wallet_id=retired.id, network=network
            )
            if sweep is None:
                sweep = await self._authorise(principal, retired, network)
            if sweep is None:
                return SweepOutcome(retired, network, "nothing_to_sweep")
            outcome = await self._carry(principal, retired, sweep, gas_payer, deadline)
            if isinstance(outcome, SweepOutcome):
                return outcome
            ended = outcome
        return SweepOutcome(retired, network, "failed", ended)

    async def _authorise(self, principal: Principal, retired: Wallet, network: str) -> WalletSweep | None:
        asset = self._settings.usdc_address(network)
        assert asset is not None  # networks() lists only networks with one
        await self._settle_payments_from(retired.address, network)
        balance = await self._chain.balance(network=network, asset=asset, owner=retired.address)
        if balance is None:
            raise ChainUnavailable(walletId=retired.id, network=network)
        if balance == 0:
            return None
        return await self._db.writing(
            records.authorise_sweep,
            principal,
            agent_id=retired.agent_id,
            wallet_id=retired.id,
            network=network,
            asset=asset,
            amount_atomic=balance,
            now=self._clock.now(),
        )

    async def _settle_payments_from(self, payer: str, network: str) -> None:
        """Ask the chain about the wallet's payments that may still move, as the reconciler would:
        each is settled, or proven lapsed, or still open (and the sweep then waits for it)."""
        for intent in await self._db.reading(
            records.open_payments_from, payer=payer, network=network, now=self._clock.now()
        ):
            await self._settlement.reconcile(intent)

    async def _carry(
        self,
        principal: Principal,
        retired: Wallet,
        sweep: WalletSweep,
        gas_payer: GasPayer | None,
        deadline: float,
    ) -> SweepOutcome | WalletSweep:
        """The sweep as far as it goes now, or the sweep itself when it ended without moving
        anything (unsigned in time, or lapsed): a new one may be authorised then."""
        sent = replaced = False
        while True:
            if sweep.status == SweepStatus.AUTHORIZED:
                sweep = await self._sign(principal, retired, sweep)
                if sweep.status not in records.OPEN:
                    return sweep
                continue
            verdict = await self._chain.judge(
                sweep.network, _expected(sweep), hint=sweep.tx_hash, valid_before=sweep.valid_before
            )
            if verdict is None:
                raise ChainUnavailable(sweepId=sweep.id, network=sweep.network)
            ended = await self._ended(principal, retired, sweep, verdict)
            if ended is not None:
                return ended
            if verdict.kind == "open" and sweep.status == SweepStatus.SIGNED:
                if gas_payer is None:
                    calldata = transfer_calldata(records.authorization_of(sweep), _signature(sweep))
                    return SweepOutcome(retired, sweep.network, "awaiting_submission", sweep, calldata)
                sweep = await self._submit(principal, sweep, gas_payer)
                continue
            if verdict.kind == "open":  # sent, and not used yet
                receipt = await self._receipt(sweep)
                if receipt is not None and receipt.get("status") == "0x0":
                    return SweepOutcome(retired, sweep.network, "reverted", sweep)
                if receipt is None and not sent:
                    if not await self._send(sweep):
                        # The node refused the recorded transaction and does not know it (its gas
                        # account without ETH, its nonce used since): once per run, a new one from
                        # this run's gas account replaces it. Both carry the same authorisation,
                        # so at most one of them can ever move the money.
                        if gas_payer is None or replaced:
                            raise SweepTransactionRefused(
                                sweepId=sweep.id, validBefore=records.unix_time(sweep.valid_before)
                            )
                        sweep, replaced = await self._submit(principal, sweep, gas_payer), True
                        continue
                    sent = True
            if time.monotonic() >= deadline:
                waiting: Outcome = "confirming" if verdict.kind == "pending" else "sent"
                return SweepOutcome(retired, sweep.network, waiting, sweep)
            await anyio.sleep(POLL_SECONDS)

    async def _ended(
        self, principal: Principal, retired: Wallet, sweep: WalletSweep, verdict: ChainVerdict
    ) -> SweepOutcome | WalletSweep | None:
        """Record what the chain settled: a transfer, a mismatch, or a lapse (the sweep expired)."""
        if verdict.kind in ("settled", "mismatch") and verdict.finding is not None:
            to = SweepStatus.SETTLED if verdict.kind == "settled" else SweepStatus.FAILED
            sweep = await self._end(principal, sweep, to, finding=verdict.finding)
            return SweepOutcome(
                retired, sweep.network, "settled" if to == SweepStatus.SETTLED else "failed", sweep
            )
        if verdict.kind == "lapsed":
            return await self._end(principal, sweep, SweepStatus.EXPIRED, lapse_block=verdict.block)
        return None

    async def _end(
        self,
        principal: Principal,
        sweep: WalletSweep,
        to: SweepStatus,
        *,
        finding: SettlementFinding | None = None,
        failure_code: str | None = None,
        lapse_block: int | None = None,
    ) -> WalletSweep:
        return await self._db.writing(
            records.end_sweep,
            principal,
            sweep_id=sweep.id,
            to=to,
            now=self._clock.now(),
            finding=finding,
            failure_code=failure_code,
            lapse_block=lapse_block,
        )

    async def _sign(self, principal: Principal, retired: Wallet, sweep: WalletSweep) -> WalletSweep:
        """Signed by the retired wallet's signer and recorded, or closed when it can no longer be."""
        now = self._clock.now()
        now_unix = int(now.timestamp())
        too_old = now_unix - sweep.valid_after > CLOCK_SKEW_SECONDS + SIGNING_DELAY_SECONDS
        if too_old or sweep.valid_before - now_unix < MIN_VALIDITY_SECONDS:
            # Never signed, so it can never be used: close it, and a new one is authorised.
            return await self._end(principal, sweep, SweepStatus.FAILED, failure_code="never_signed")
        current = await self._db.reading(records.current_wallet_of, principal, agent_id=sweep.agent_id)
        try:
            domain = await self._chain.token_domain(sweep.network, asset=sweep.asset)
        except DomainNotDeclared as exc:
            raise TokenDomainUnknown(sweepId=sweep.id, network=sweep.network) from exc
        except RpcError as exc:
            raise ChainUnavailable(sweepId=sweep.id, network=sweep.network) from exc
        try:
            signer = signer_for(
                retired,
                self._master,
                usdc_by_network=self._settings.assets,
                clock=self._clock,
                cdp=await self._cdp_access(retired),
            )
        except SignerError as exc:
            raise SweepSigningFailed(sweepId=sweep.id, walletId=retired.id) from exc
        request = TransferRequest(
            network=sweep.network,
            asset=sweep.asset,
            pay_to=sweep.pay_to,
            amount_atomic=sweep.amount_atomic,
            domain_name=domain.name,
            domain_version=domain.version,
        )
        try:
            signed = await signer.sign_payment(records.to_sign(sweep, current), request)
        except SignRefused as refused:
            await self._db.writing(
                records.refuse_signature,
                principal,
                sweep_id=sweep.id,
                wallet=retired,
                refused=refused,
                now=now,
            )
            raise
        except CdpPolicyRefused:
            await self._db.writing(
                records.refuse_at_cdp, principal, sweep_id=sweep.id, wallet=retired, now=now
            )
            raise SweepRefusedAtCdp(sweepId=sweep.id, walletId=retired.id) from None
        except CdpError as exc:
            # CDP out of reach or refusing the request: nothing signed, the sweep stays authorised
            # and a run again asks CDP again (the same request: its idempotency key is the nonce's).
            raise type(exc)(**exc.extra, sweepId=sweep.id) from None
        return await self._db.run(self._record_signature, principal, sweep.id, signed.signature)

    async def _cdp_access(self, wallet: Wallet) -> CdpAccess | None:
        """For a `cdp` wallet, how its signer reaches CDP: the organisation's credentials, read now."""
        if wallet.mode != WalletMode.CDP:
            return None
        sealed = await self._db.reading(sealed_cdp_credentials, org_id=wallet.org_id)
        return CdpAccess(api_url=self._settings.cdp_api_url, sealed_credentials=sealed)

    def _record_signature(self, principal: Principal, sweep_id: str, signature: str) -> WalletSweep:
        # On disk before the signature can leave this process (SQLite's default would survive a
        # crash of the process, not a power cut).
        with self._db.write(durable=True) as session:
            return records.record_signature(
                session, principal, sweep_id=sweep_id, signature=signature, now=self._clock.now()
            )

    async def _submit(self, principal: Principal, sweep: WalletSweep, gas_payer: GasPayer) -> WalletSweep:
        """A transaction carrying the authorisation, signed by the gas account and recorded (in
        place of a submitted one the node refused); then the loop sends it (the one recorded:
        another run's, if it recorded first)."""
        data = transfer_calldata(records.authorization_of(sweep), _signature(sweep))
        try:
            signed = await self._chain.sign_call(sweep.network, gas_payer, to=sweep.asset, data=data)
        except RpcRefused as exc:
            raise SweepTransactionRefused(
                sweepId=sweep.id, validBefore=records.unix_time(sweep.valid_before)
            ) from exc
        except RpcError as exc:
            raise ChainUnavailable(sweepId=sweep.id, network=sweep.network) from exc
        return await self._db.run(self._record_transaction, principal, sweep.id, signed, sweep.tx_hash)

    def _record_transaction(
        self, principal: Principal, sweep_id: str, signed: SignedTransaction, replacing: str | None
    ) -> WalletSweep:
        with self._db.write(durable=True) as session:
            return records.record_transaction(
                session,
                principal,
                sweep_id=sweep_id,
                signed=signed,
                replacing=replacing,
                now=self._clock.now(),
            )

    async def _send(self, sweep: WalletSweep) -> bool:
        """Send the recorded transaction (again); False when the node refuses it and does not know it."""
        assert sweep.raw_transaction is not None
        assert sweep.tx_hash is not None
        assert sweep.submitted_by is not None
        signed = SignedTransaction(sweep.raw_transaction, sweep.tx_hash, sweep.submitted_by)
        try:
            await self._chain.send_transaction(sweep.network, signed)
        except RpcRefused:
            return False
        except RpcError as exc:
            raise ChainUnavailable(sweepId=sweep.id, network=sweep.network) from exc
        return True

    async def _receipt(self, sweep: WalletSweep) -> dict[str, object] | None:
        assert sweep.tx_hash is not None
        try:
            return await self._chain.receipt(sweep.network, sweep.tx_hash)
        except RpcError as exc:
            raise ChainUnavailable(sweepId=sweep.id, network=sweep.network) from exc


def _expected(sweep: WalletSweep) -> ExpectedTransfer:
    return ExpectedTransfer(
        asset=sweep.asset,
        payer=sweep.payer,
        pay_to=sweep.pay_to,
        amount_atomic=sweep.amount_atomic,
        nonce=sweep.nonce,
    )


def _signature(sweep: WalletSweep) -> str:
    assert sweep.signature is not None  # signed or submitted
    return sweep.signature
