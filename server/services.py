"""The process's long-lived services, built once from settings and shared by HTTP, MCP and jobs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

import anyio

from auth.client_documents import MAX_DOCUMENT_BYTES, ClientDocuments
from auth.housekeeping import IdentityHousekeeping
from auth.oauth_server import OAuthConfig
from auth.passkeys import RelyingParty
from auth.sessions import Csrf
from auth.token_families import TokenPolicy
from auth.verifier import TokenVerifier
from server.approvals.notifications import ApprovalNotifier
from server.approvals.policy_changes import ExpirePolicyChanges
from server.audit.jobs import LogAuditHeads
from server.catalog.verification import CatalogVerificationJob, CatalogVerifier
from server.chain.service import ChainService
from server.jobs.runner import Job
from server.kit.clock import Clock, SystemClock
from server.kit.db import Database
from server.kit.stopping import Stopping
from server.payments.handover import HandOverService
from server.payments.preflight.diagnosis import DiagnosisService
from server.payments.preflight.quote import QuoteService
from server.payments.purchase import PurchaseService
from server.payments.settlement.reconciler import ExpireAuthorizations, SettlementReconciler
from server.payments.settlement.watch import OutOfPolicyWatch
from server.sellers.client import SellerClient
from server.settings import Settings
from server.signers.cdp_api import CdpClientPool
from server.wallet_policies.sync import CdpReach, WalletPolicySync


@dataclass
class Services:
    settings: Settings
    db: Database
    clock: Clock
    verifier: TokenVerifier
    sellers: SellerClient
    chain: ChainService
    purchases: PurchaseService
    handovers: HandOverService
    quotes: QuoteService
    oauth: OAuthConfig
    client_documents: ClientDocuments
    relying_party: RelyingParty
    csrf: Csrf
    diagnoses: DiagnosisService
    cdp: CdpReach
    jobs: list[Job] = field(default_factory=list)
    # Set when the process is stopping (server/kit/stopping.py): waits end, new calls are refused.
    stopping: Stopping = field(default_factory=Stopping)

    async def aclose(self, *, settle_wait_s: float = 5) -> None:
        with anyio.move_on_after(settle_wait_s):  # the settlement looks already started finish first
            await self.purchases.settled_in_background()
        await self.sellers.aclose()
        await self.chain.aclose()
        if self.cdp.pool is not None:
            await self.cdp.pool.aclose()
        self.db.dispose()


def oauth_config(settings: Settings) -> OAuthConfig:
    return OAuthConfig(
        issuer=settings.public_url,
        resource=settings.mcp_url,
        aliases=settings.resource_aliases(),
        tokens=TokenPolicy(
            access_ttl=settings.access_token_ttl,
            refresh_ttl=settings.refresh_token_ttl,
            grace_seconds=settings.refresh_grace_seconds,
            successor_key=settings.master.derive("paywarden refresh successors"),
        ),
    )


def build_services(
    settings: Settings,
    *,
    clock: Clock | None = None,
    db: Database | None = None,
    document_http: SellerClient | None = None,
) -> Services:
    """`document_http` replaces the client that fetches client metadata documents (tests give one
    that trusts their own certificate authority)."""
    clock = clock or SystemClock()
    db = db or Database(settings.database_url, pool_size=settings.database_pool_size)
    sellers = SellerClient(
        max_response_bytes=settings.max_response_bytes, allow_private_hosts=settings.allow_private_hosts
    )
    chain = ChainService(
        settings.rpc_urls,
        confirmations=settings.confirmations,
        balance_life_s=settings.balance_cache_ms / 1000,
    )
    # Client metadata documents come through the same guarded client as sellers, with a small cap.
    document_http = document_http or SellerClient(
        max_response_bytes=MAX_DOCUMENT_BYTES + 1, allow_private_hosts=settings.allow_private_hosts
    )
    stopping = Stopping()
    cdp_clients = CdpClientPool()  # shared by payments, the wallet policy job and the pages
    purchases = PurchaseService(
        db=db,
        settings=settings,
        sellers=sellers,
        chain=chain,
        clock=clock,
        stopping=stopping,
        cdp_clients=cdp_clients,
    )
    catalog = CatalogVerifier(
        db=db,
        sellers=sellers,
        usdc_by_network=settings.assets,
        timeout_ms=settings.fetch_timeout_ms,
        clock=clock,
    )
    cdp = CdpReach(
        master=settings.master,
        api_url=settings.cdp_api_url,
        usdc_by_network=settings.assets,
        pool=cdp_clients,
    )
    jobs: list[Job] = [
        SettlementReconciler(db=db, chain=chain, clock=clock),
        WalletPolicySync(db=db, clock=clock, reach=cdp),
        OutOfPolicyWatch(db=db, chain=chain, clock=clock, assets=settings.assets),
        ExpireAuthorizations(db=db, chain=chain, clock=clock),
        ExpirePolicyChanges(db=db, clock=clock),
        IdentityHousekeeping(db=db, clock=clock),
        CatalogVerificationJob(catalog),
        LogAuditHeads(db=db),
    ]
    # Always: an organisation may save its own webhook on the settings page at any time.
    jobs.append(
        ApprovalNotifier(
            db=db,
            clock=clock,
            webhook_url=(
                settings.slack_webhook_url.get_secret_value()
                if settings.slack_webhook_url is not None
                else None
            ),
            public_url=settings.public_url,
            master=settings.master,
        )
    )
    return Services(
        settings=settings,
        db=db,
        clock=clock,
        verifier=TokenVerifier(db, clock),
        sellers=sellers,
        chain=chain,
        purchases=purchases,
        handovers=HandOverService(db=db, master=settings.master, purchases=purchases, clock=clock),
        quotes=QuoteService(db=db, settings=settings, sellers=sellers, clock=clock),
        oauth=oauth_config(settings),
        client_documents=ClientDocuments(
            db=db,
            http=document_http,
            clock=clock,
            failure_ttl=timedelta(seconds=settings.client_document_failure_ttl),
        ),
        relying_party=RelyingParty(rp_id=settings.rp_id, origin=settings.pages_origin),
        csrf=Csrf(settings.master.derive("paywarden csrf")),
        diagnoses=DiagnosisService(db=db, settings=settings, sellers=sellers, chain=chain, clock=clock),
        cdp=cdp,
        jobs=jobs,
        stopping=stopping,
    )
