"""What the command line prints: one JSON object per command (`--json`), built here from the
domain objects the services return. The same objects read as `key: value` lines without --json.

Field names are camelCase like the MCP tools' results; amounts are USD strings; times ISO 8601.
Vocabulary (roles, kinds, scopes...) is printed as its plain value.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from server.kit.clock import isoformat
from server.kit.money import format_usd

if TYPE_CHECKING:  # the types only: `--help` must not load the services (see docs/cli.md)
    from auth.clients import NewClient
    from auth.tokens import IssuedToken
    from server.audit.service import ChainBreak
    from server.catalog.imports import ImportReport
    from server.catalog.service import Listing
    from server.catalog.verification import CheckResult
    from server.models import (
        AccessToken,
        Agent,
        Approval,
        AuditEvent,
        CatalogEntry,
        CatalogOffer,
        Member,
        OAuthClient,
        Organization,
        PaymentIntent,
        Team,
        Wallet,
        WalletSweep,
    )
    from server.payments.preflight.diagnosis import Diagnosis
    from server.payments.sweeps.listing import AgentWallets, ListedWallet
    from server.payments.sweeps.sweeper import SweepOutcome
    from server.policy.model import Policy
    from server.policy.rules import Rule
    from server.wallets.replacement import Rotated
    from server.wallets.rotation import Rotation

Document = dict[str, Any]


def _value(item: StrEnum | None) -> str | None:
    return None if item is None else str(item)


def migration(*, before: str | None, after: str | None, database: str) -> Document:
    return {"from": before, "to": after, "database": database}


def org_created(org: Organization, *, monthly_cap_rule_id: str | None) -> Document:
    return {"orgId": org.id, "name": org.name, "monthlyCapRuleId": monthly_cap_rule_id}


def org_settings(org: Organization) -> Document:
    return {"orgId": org.id, "approvalTtlSeconds": org.approval_ttl_seconds}


def agent(row: Agent) -> Document:
    return {
        "agentId": row.id,
        "orgId": row.org_id,
        "name": row.name,
        "network": row.network,
        "teamId": row.team_id,
        "memberId": row.member_id,
    }


def agent_listed(row: Agent) -> Document:
    return {**agent(row), "createdAt": isoformat(row.created_at), "disabled": row.disabled_at is not None}


def payment(row: PaymentIntent) -> Document:
    """A payment as `payments list` and `payments export` write it: one flat row."""
    return {
        "intentId": row.id,
        "agentId": row.agent_id,
        "createdAt": isoformat(row.created_at),
        "status": str(row.status),
        "host": row.host,
        "payTo": row.pay_to,
        "amountUsd": format_usd(row.amount_atomic, atomic=True),
        "amountAtomic": row.amount_atomic,
        "network": row.network,
        "transaction": row.tx_hash,
    }


PAYMENT_COLUMNS = (
    "intentId",
    "agentId",
    "createdAt",
    "status",
    "host",
    "payTo",
    "amountUsd",
    "amountAtomic",
    "network",
    "transaction",
)


def policy(row: Agent, current: Policy) -> Document:
    return {"agentId": row.id, "policyVersion": current.version, "policy": current.to_document()}


def master_key_rotated(rotation: Rotation, *, key_file: Path | None) -> Document:
    return {
        "keyId": rotation.key_id,
        "previousKeyId": rotation.previous_key_id,
        "resealed": dict(rotation.resealed),
        "auditChainKeyStored": rotation.chain_key_stored,
        "keyFile": str(key_file) if key_file is not None else None,
    }


def wallet(row: Wallet) -> Document:
    return {"agentId": row.agent_id, "address": row.address, "mode": _value(row.mode)}


def wallet_rotated(rotated: Rotated) -> Document:
    return {
        "agentId": rotated.wallet.agent_id,
        "walletId": rotated.wallet.id,
        "address": rotated.wallet.address,
        "mode": _value(rotated.wallet.mode),
        "accountName": rotated.wallet.account_name,
        "retiredWalletId": rotated.retired.id,
        "retiredAddress": rotated.retired.address,
    }


def sweep_row(row: WalletSweep) -> Document:
    return {
        "sweepId": row.id,
        "walletId": row.wallet_id,
        "network": row.network,
        "status": str(row.status),
        "from": row.payer,
        "to": row.pay_to,
        "amountUsd": format_usd(row.amount_atomic, atomic=True),
        "amountAtomic": row.amount_atomic,
        "txHash": row.tx_hash,
        "failureCode": row.failure_code,
        "createdAt": isoformat(row.created_at),
        "endedAt": isoformat(row.ended_at) if row.ended_at else None,
    }


def listed_wallet(listed: ListedWallet) -> Document:
    row = listed.wallet
    return {
        "walletId": row.id,
        "address": row.address,
        "mode": _value(row.mode),
        "state": "current" if listed.current else "retired",
        "createdAt": isoformat(row.created_at),
        "retiredAt": isoformat(row.retired_at) if row.retired_at else None,
        "balances": [
            {
                "network": entry.network,
                "balanceUsd": _usd_or_none(entry.balance_atomic),
                "balanceAtomic": entry.balance_atomic,
                "balanceError": _value(entry.reason),
            }
            for entry in listed.balances
        ],
        "sweeps": [sweep_row(row) for row in listed.sweeps],
    }


def agent_wallets(found: AgentWallets) -> Document:
    return {"agentId": found.agent.id, "wallets": [listed_wallet(item) for item in found.wallets]}


def agent_wallets_text(document: Document) -> str:
    """One block per wallet: its state and address, then a line per network's balance and sweep."""
    from server.kit.networks import network_name

    if not document["wallets"]:
        return "the agent has no wallet"
    blocks = []
    for item in document["wallets"]:
        since = f"retired {item['retiredAt']}" if item["retiredAt"] else f"since {item['createdAt']}"
        lines = [f"{item['state']:<8} {item['address']}  {item['mode']}  {since}"]
        for entry in item["balances"]:
            told = (
                f"{entry['balanceUsd']} USDC" if entry["balanceUsd"] else f"unknown ({entry['balanceError']})"
            )
            lines.append(f"  {network_name(entry['network'])}: {told}")
        for sweep in item["sweeps"]:
            lines.append(
                f"  sweep {sweep['sweepId']} {sweep['status']}: {sweep['amountUsd']} USDC "
                f"on {network_name(sweep['network'])}"
                + (f", tx {sweep['txHash']}" if sweep["txHash"] else "")
            )
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


# The outcomes that need nothing more; any other means: run `wallet sweep` again.
SWEEP_DONE = frozenset({"settled", "nothing_to_sweep", "failed"})


def sweep_outcome(done: SweepOutcome) -> Document:
    document: Document = {
        "walletId": done.wallet.id,
        "from": done.wallet.address,
        "network": done.network,
        "outcome": done.outcome,
        "sweep": sweep_row(done.sweep) if done.sweep is not None else None,
    }
    sweep = done.sweep
    if done.calldata is not None and sweep is not None:
        document["submission"] = {
            "token": sweep.asset,
            "calldata": done.calldata,
            "authorization": {
                "from": sweep.payer,
                "to": sweep.pay_to,
                "value": str(sweep.amount_atomic),
                "validAfter": str(sweep.valid_after),
                "validBefore": str(sweep.valid_before),
                "nonce": sweep.nonce,
            },
            "signature": sweep.signature,
            "sendBefore": isoformat(datetime.fromtimestamp(sweep.valid_before, UTC)),
        }
    return document


def sweeps(outcomes: Sequence[SweepOutcome]) -> Document:
    return {"sweeps": [sweep_outcome(done) for done in outcomes]}


_SWEEP_WORDS = {
    "nothing_to_sweep": "nothing to sweep",
    "settled": "swept: the transfer is on-chain",
    "confirming": "on-chain, waiting for confirmations: run the command again",
    "awaiting_submission": (
        "signed: send the calldata below to the token from any funded account, then run the command again"
    ),
    "sent": "sent, not mined yet: run the command again",
    "reverted": (
        "the transaction failed and nothing moved: run the command again once the authorisation lapsed"
    ),
    "failed": "the chain shows another transfer than the one signed: see the audit log",
}


def sweeps_text(document: Document) -> str:
    from server.kit.networks import network_name

    lines = []
    for item in document["sweeps"]:
        sweep = item["sweep"]
        lines.append(f"{item['from']} on {network_name(item['network'])}: {_SWEEP_WORDS[item['outcome']]}")
        if sweep is not None:
            lines.append(f"  {sweep['amountUsd']} USDC to {sweep['to']} (sweep {sweep['sweepId']})")
            if sweep["txHash"]:
                lines.append(f"  transaction {sweep['txHash']}")
        submission = item.get("submission")
        if submission:
            lines += [
                f"  to:       {submission['token']}",
                f"  calldata: {submission['calldata']}",
                f"  before:   {submission['sendBefore']}",
            ]
    return "\n".join(lines) if lines else "nothing to sweep"


def token_issued(issued: IssuedToken) -> Document:
    return {
        "tokenId": issued.token_id,
        "token": issued.token,
        "expiresAt": isoformat(issued.expires_at),
        "scopes": [str(scope) for scope in issued.scopes],
    }


def token_listed(row: AccessToken, *, last_used_at: datetime | None) -> Document:
    return {
        "tokenId": row.id,
        "kind": "agent" if row.agent_id is not None else "admin",
        "orgId": row.org_id,
        "agentId": row.agent_id,
        "scopes": row.scopes.split(),
        "label": row.label,
        "createdBy": row.created_by,
        "createdAt": isoformat(row.created_at),
        "expiresAt": isoformat(row.expires_at),
        "lastUsedAt": isoformat(last_used_at) if last_used_at else None,
    }


def audit_event(row: AuditEvent) -> Document:
    return {
        "seq": row.seq,
        "eventId": row.id,
        "orgId": row.org_id,
        "kind": row.type,
        "actor": row.actor,
        "agentId": row.agent_id,
        "subjectId": row.subject_id,
        "data": row.data,
        "createdAt": isoformat(row.created_at),
    }


def token_revoked(row: AccessToken) -> Document:
    return {"tokenId": row.id, "revokedAt": isoformat(row.revoked_at) if row.revoked_at else None}


def client_created(created: NewClient, *, token_url: str) -> Document:
    row = created.row
    return {
        "clientId": row.client_id,
        "clientSecret": created.secret,
        "agentId": row.agent_id,
        "name": row.name,
        "scopes": (row.scope or "").split(),
        "tokenUrl": token_url,
    }


def client_revoked(row: OAuthClient) -> Document:
    return {"clientId": row.client_id, "revokedAt": isoformat(row.disabled_at) if row.disabled_at else None}


def enrollment(row: Member, *, enroll_url: str, expires_at: datetime) -> Document:
    return {
        "memberId": row.id,
        "email": row.email,
        "enrollUrl": enroll_url,
        "expiresAt": isoformat(expires_at),
    }


def team(row: Team) -> Document:
    return {"teamId": row.id, "orgId": row.org_id, "name": row.name}


def member_listed(row: Member) -> Document:
    return {
        "memberId": row.id,
        "orgId": row.org_id,
        "email": row.email,
        "role": _value(row.role),
        "enrolled": row.enroll_token_hash is None,
        "disabled": row.disabled_at is not None,
        "createdAt": isoformat(row.created_at),
    }


def member_created(row: Member, *, enroll_url: str, daily_cap_rule_id: str | None) -> Document:
    return {
        "memberId": row.id,
        "orgId": row.org_id,
        "email": row.email,
        "role": _value(row.role),
        "enrollUrl": enroll_url,
        "dailyCapRuleId": daily_cap_rule_id,
    }


def rule(item: Rule) -> Document:
    return {
        "ruleId": item.id,
        "version": item.version,
        "scope": _value(item.scope),
        "kind": _value(item.kind),
        "host": item.host,
        "pathPrefix": item.path_prefix,
        "limitUsd": None if item.limit_atomic is None else format_usd(item.limit_atomic, atomic=True),
        "window": _value(item.window),
        "source": _value(item.source),
        "expiresAt": item.expires_at.isoformat() if item.expires_at else None,
    }


def rule_removed(item: Rule) -> Document:
    return {"ruleId": item.id, "version": item.version, "removed": True}


def rules_of_org(org: Organization, rules: Iterable[tuple[Rule, str]]) -> Document:
    return {"orgId": org.id, "rules": [{**rule(item), "scopeId": scope_id} for item, scope_id in rules]}


def _catalog_status(entry: CatalogEntry) -> str:
    if entry.suspended_at is not None:
        return "suspended"
    return "listed" if entry.accepted_at is not None else "candidate"


def _offer(offer: CatalogOffer) -> Document:
    return {
        "network": offer.network,
        "priceUsd": format_usd(offer.amount_atomic, atomic=True),
        "payTo": offer.pay_to,
    }


def _when(value: datetime | None) -> str | None:
    return isoformat(value) if value else None


def catalog_entry(item: Listing, *, with_seller_text: bool = False) -> Document:
    """An entry as an operator sees it. `priceUsd` and `network` are its cheapest offer's."""
    entry = item.entry
    cheapest = min(item.offers, key=lambda offer: (offer.amount_atomic, offer.network), default=None)
    document: Document = {
        "id": entry.id,
        "status": _catalog_status(entry),
        "name": entry.name,
        "host": entry.host,
        "url": entry.url,
        "method": entry.method,
        "exampleBody": entry.example_body,
        "category": entry.category,
        "summary": entry.summary,
        "source": _value(entry.source),
        "priceUsd": format_usd(cheapest.amount_atomic, atomic=True) if cheapest else None,
        "network": cheapest.network if cheapest else None,
        "offers": [_offer(offer) for offer in item.offers],
        "payToMode": _value(entry.pay_to_mode),
        "payTo": list(entry.pinned_pay_to),
        "observedPayTo": list(entry.observed_pay_to),
        "verifiedAt": _when(entry.verified_at),
        "checkedAt": _when(entry.checked_at),
        "checkError": entry.check_error,
        "suspendedAt": _when(entry.suspended_at),
        "suspensionReason": _value(entry.suspension_reason),
        "acceptedAt": _when(entry.accepted_at),
    }
    if entry.seller_description:
        # The seller's own words, for the operator deciding on it; never shown to an agent unfenced.
        document["sellerDescription"] = {"untrusted": True} | (
            {"text": entry.seller_description} if with_seller_text else {}
        )
    return document


def catalog_entries(items: Sequence[Listing]) -> Document:
    return {"entries": [catalog_entry(item) for item in items]}


def catalog_table(document: Document) -> str:
    rows = [
        f"{e['id']}  {e['status']:<9}  {e['host']:<32}  {e['priceUsd'] or '-':>8}  "
        f"{e['network'] or '-':<13}  verified {e['verifiedAt'] or 'never'}"
        for e in document["entries"]
    ]
    return "\n".join(rows) or "The catalog is empty."


def catalog_import(report: ImportReport, *, pages: int | None = None) -> Document:
    document: Document = {
        "added": [
            {"id": entry.id, "host": entry.host, "status": _catalog_status(entry)} for entry in report.added
        ],
        "skipped": [{"ref": item.ref, "reason": item.reason} for item in report.skipped],
    }
    if pages is not None:
        document["pages"] = pages
    return document


def catalog_check(result: CheckResult) -> Document:
    return {
        "id": result.entry_id,
        "host": result.host,
        "outcome": _value(result.outcome),
        "error": _value(result.error),
        "checkedAt": isoformat(result.checked_at),
        "offers": [_offer(offer) for offer in result.offers],
        "payees": list(result.payees),
        "newPayees": list(result.new_payees),
    }


def catalog_checks(results: Sequence[CheckResult]) -> Document:
    return {"checked": len(results), "results": [catalog_check(result) for result in results]}


def catalog_checks_table(document: Document) -> str:
    rows = [f"{r['host']:<32}  {r['outcome']:<9}  {r['error'] or ''}" for r in document["results"]]
    return "\n".join(rows) or "Nothing was due for a check."


def broken_link(found: ChainBreak) -> Document:
    document: Document = {
        "orgId": found.org_id,
        "seq": found.seq,
        "eventId": found.event_id,
        "reason": found.reason,
    }
    if found.last_seq is not None:
        document["lastSeq"] = found.last_seq
    return document


def audit_verification(*, checked: int, broken: Sequence[Document]) -> Document:
    return {"intact": not broken, "checked": checked, "broken": list(broken)}


def demo(
    *,
    org: Organization,
    row: Agent,
    owner: Member,
    issued: IssuedToken,
    mcp_url: str,
    admin_url: str,
    enroll_url: str | None,
) -> Document:
    return {
        "orgId": org.id,
        "agentId": row.id,
        "memberId": owner.id,
        "memberEmail": owner.email,
        "enrollUrl": enroll_url,
        "mcpUrl": mcp_url,
        "tokenId": issued.token_id,
        "token": issued.token,
        "expiresAt": isoformat(issued.expires_at),
        "scopes": [str(scope) for scope in issued.scopes],
        "adminUrl": admin_url,
    }


def approval(row: Approval, now: datetime) -> Document:
    """An approval as an operator sees it: everything the agent sees, and who decided."""
    from server.approvals import service as approvals

    return {
        "approvalId": row.id,
        "status": str(approvals.effective_status(row, now)),
        "intentId": row.intent_id,
        "amountUsd": format_usd(row.amount_atomic, atomic=True),
        "host": row.host,
        "reason": str(row.reason),
        "holdReasons": row.decision.get("holdReasons") or [str(row.reason)],
        "createdAt": isoformat(row.created_at),
        "decidedAt": isoformat(row.decided_at) if row.decided_at else None,
        "expiresAt": isoformat(approvals.agent_view(row, now).expires_at),
        "agentId": row.agent_id,
        "payTo": row.pay_to,
        "network": row.network,
        "resource": row.resource,
        "thresholdUsd": None
        if row.threshold_atomic is None
        else format_usd(row.threshold_atomic, atomic=True),
        "decidedBy": row.decided_by,
        "versions": row.decision.get("versions"),
    }


def approvals_of_org(org: Organization, rows: Iterable[Approval], now: datetime) -> Document:
    return {"orgId": org.id, "approvals": [approval(row, now) for row in rows]}


def _usd_or_none(atomic: int | None) -> str | None:
    return None if atomic is None else format_usd(atomic, atomic=True)


def diagnosis(d: Diagnosis) -> Document:
    """`doctor --json`: the fields diagnose_payment's result has."""
    from server.payments.preflight.report import explain, issue_report

    told = explain(d)
    wallet = d.wallet
    return {
        "status": str(d.status),
        "summary": told.summary,
        "explanation": told.explanation,
        "action": told.action,
        "cause": None
        if d.cause is None
        else {"code": str(d.cause), "reasons": list(d.reasons), "fetchPaidError": d.cause.fetch_paid_error},
        "warnings": [str(warning) for warning in d.warnings],
        "request": {
            "method": d.request.method,
            "url": d.request.url,
            "httpStatus": d.request.http_status,
            "x402Version": d.request.x402_version,
        },
        "resourceHost": d.resource_host,
        "accepts": [
            {
                "scheme": a.scheme,
                "network": a.network,
                "asset": a.asset,
                "amount": a.amount,
                "amountUsd": _usd_or_none(a.amount_atomic),
                "payTo": a.pay_to,
                "payable": a.payable,
                "reason": a.reason,
            }
            for a in d.accepts
        ],
        "wallet": None
        if wallet is None
        else {
            "address": wallet.address,
            "source": str(wallet.source),
            "network": wallet.network,
            "balanceUsdc": _usd_or_none(wallet.balance_atomic),
            "amountUsdc": _usd_or_none(wallet.needed_atomic),
            "rpcHost": wallet.rpc_host,
        },
        "chatRules": [],  # doctor reads no account, so no rules
        "ruleBlocks": [],
        "steps": [
            {"step": str(seen.step), "status": str(seen.status), "code": seen.code} for seen in d.steps
        ],
        "issueReport": issue_report(d),
    }


def diagnosis_text(document: Document) -> str:
    cause = document["cause"]
    lines = [("Problem: " if document["status"] == "problem" else "") + document["explanation"]]
    if cause is not None:
        answer = cause["fetchPaidError"]
        lines.append(
            f"Cause: {cause['code']}"
            + (f" ({', '.join(cause['reasons'])})" if cause["reasons"] else "")
            + (f"; fetch_paid would fail with {answer}" if answer else "")
        )
    lines.append(f"What to do: {document['action']}")
    if document["warnings"]:
        lines.append("Warnings: " + ", ".join(document["warnings"]))
    lines += ["", "Issue report (paste it into a bug report):", "", document["issueReport"]]
    return "\n".join(lines)
