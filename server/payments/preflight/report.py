"""What a diagnosis says to people: the cause in a sentence, what to do, and a Markdown report to
paste into an issue. Every sentence is ours, filled in only with values Paywarden checked (codes,
amounts, network names, the host asked for); nothing a seller wrote. The report leaves out the
query string and shortens the wallet.
"""

from __future__ import annotations

from dataclasses import dataclass

from server.kit.clock import isoformat
from server.kit.money import format_usd
from server.kit.networks import network_name
from server.payments.preflight.diagnosis import Cause, Diagnosis, Status

PRODUCT = "Paywarden 0.1.0"


@dataclass(frozen=True)
class Explanation:
    summary: str
    explanation: str
    action: str


def short_wallet(address: str) -> str:
    return f"{address[:6]}…{address[-4:]}" if len(address) > 12 else address


def _usdc(atomic: int | None) -> str:
    return "?" if atomic is None else format_usd(atomic, atomic=True)


def _network(network: str | None) -> str:
    return network_name(network) if network else "its network"


def _price(d: Diagnosis) -> str:
    return f"{_usdc(d.amount_atomic)} USDC on {_network(d.selection_network)}"


def _cause(d: Diagnosis) -> tuple[str, str]:
    """(what happened, what to do) for the diagnosis' cause."""
    reasons = ", ".join(d.reasons)
    seconds = d.timeout_ms // 1000
    match d.cause:
        case Cause.HOST_NOT_ALLOWED:
            return (
                f"{d.host} is not one of this agent's allowed hosts, so fetch_paid would not even send "
                "the request.",
                "Ask a person to add the host to the agent's allowed hosts, or to turn on its "
                "catalog-hosts rule if the host is listed in the catalog.",
            )
        case Cause.SELLER_UNREACHABLE:
            return (
                "The URL could not be reached: the name did not resolve or the connection failed.",
                "Check the URL; if it is right, the seller is down: try again later.",
            )
        case Cause.SELLER_TIMEOUT:
            return (
                f"The URL did not answer within {seconds} seconds.",
                "Try again later; if it stays this slow, tell the seller.",
            )
        case Cause.REDIRECT_NOT_FOLLOWED:
            return (
                "The URL redirects to another origin before asking for payment. fetch_paid returns such "
                "a redirect as it is and pays nothing.",
                "Use the URL the seller documents for this API; never pay a redirect's target blindly.",
            )
        case Cause.SELLER_ERROR:
            return (
                f"The URL answered HTTP {d.request.http_status} instead of 402 Payment Required: it "
                "asked for no payment, so fetch_paid would return that answer unpaid.",
                "Check the URL, the method and the body against the seller's documentation.",
            )
        case Cause.INVALID_PAYMENT_REQUIRED:
            return (
                f"The URL answered 402 but its payment challenge cannot be read ({reasons}).",
                "Nothing can pay it as it is: send the seller the report below.",
            )
        case Cause.NO_PAYABLE_ENTRY:
            return (
                "None of the seller's payment options is exact USDC on Base or Base Sepolia with a whole "
                f"amount (the closest fails on: {reasons}).",
                "Ask the seller to accept exact USDC on Base or Base Sepolia; `accepts` lists what it "
                "offers and why each cannot be paid.",
            )
        case Cause.AMOUNT_EXCEEDS_MAX:
            return (
                f"The price, {_price(d)}, is over this call's maxAmountUsd of {d.max_amount}.",
                "Raise maxAmountUsd if the price is acceptable, or leave it.",
            )
        case Cause.RESOURCE_MISMATCH:
            return (
                f"The seller asks to be paid for a resource on {d.resource_host} while {d.host} was "
                "requested, so fetch_paid refuses to pay it.",
                "Do not pay it another way: send the seller the report below.",
            )
        case Cause.WALLET_NOT_CONFIGURED:
            return (
                "This agent has no wallet to sign with.",
                "Ask an admin to import or connect a wallet for the agent.",
            )
        case Cause.INSUFFICIENT_FUNDS:
            wallet = d.wallet
            assert wallet is not None
            return (
                f"Wallet {short_wallet(wallet.address)} holds {_usdc(wallet.balance_atomic)} USDC on "
                f"{_network(wallet.network)}, and this payment needs {_usdc(wallet.needed_atomic)} USDC.",
                "Add USDC to that wallet on that network, then try again.",
            )
        case Cause.POLICY_DENIED:
            return (
                f"The agent's spending policy would deny this payment ({reasons}).",
                "Only a person can change the policy or its rules; get_budget shows what each limit "
                "leaves and when it resets.",
            )
    raise AssertionError(d.cause)  # pragma: no cover


def explain(d: Diagnosis) -> Explanation:
    if d.cause is not None:
        what, action = _cause(d)
        return Explanation(f"{what} {action}", what, action)
    if d.rule_blocks:
        rules = ", ".join(block.rule_id for block in d.rule_blocks)
        what = f"The 402 is fine, but spending rules ({rules}) leave less than its price, {_price(d)}."
        action = "Wait for the rules to reset (resetsAt), or ask a person to change them."
        return Explanation(f"{what} {action}", what, action)
    if d.request.http_status != 402:
        what = (
            f"No problem found: the URL answered HTTP {d.request.http_status} without asking for payment, "
            "so fetch_paid would return it without paying."
        )
        return Explanation(what, what, "Nothing to do.")
    if d.hold_reason is not None:
        what = (
            f"No problem found: the URL asks for {_price(d)}, and fetch_paid would pay it once a person "
            f"approves it (reason: {d.hold_reason})."
        )
        return Explanation(what, what, "Call fetch_paid and give the user the approval link it returns.")
    if d.policy_read:
        what = f"No problem found: the URL asks for {_price(d)}, and fetch_paid would pay it now."
        return Explanation(what, what, "Call fetch_paid.")
    what = (
        f"No problem found: the URL asks for {_price(d)}, which Paywarden can pay. Whether an agent may pay "
        "it also depends on its policy, which this check does not read."
    )
    return Explanation(what, what, "Pay it through fetch_paid, under the agent's policy.")


def _status(d: Diagnosis) -> str:
    if d.request.http_status is not None:
        return str(d.request.http_status)
    return "not sent (host not allowed)" if d.cause == Cause.HOST_NOT_ALLOWED else "no answer"


def issue_report(d: Diagnosis) -> str:
    """Markdown a person can paste into a bug report: no query string, the wallet shortened."""
    told = explain(d)
    lines = [
        "### x402 payment diagnosis",
        "",
        f"- Request: `{d.request.method} {d.request.url}` (query string removed)",
        f"- HTTP status: {_status(d)}"
        + (f", x402 version {d.request.x402_version}" if d.request.x402_version is not None else ""),
        f"- Result: {d.status}"
        + (f", cause `{d.cause}`" if d.cause else "")
        + (f" ({', '.join(d.reasons)})" if d.reasons else "")
        + (
            f", fetch_paid error `{d.cause.fetch_paid_error}`" if d.cause and d.cause.fetch_paid_error else ""
        ),
        f"- Host requested: `{d.host}`"
        + (f", challenge names `{d.resource_host}`" if d.resource_host else ""),
    ]
    if d.warnings:
        lines.append("- Warnings: " + ", ".join(f"`{warning}`" for warning in d.warnings))
    if d.wallet is not None:
        wallet = d.wallet
        lines.append(
            f"- Wallet: {short_wallet(wallet.address)} ({wallet.source})"
            + (
                f", balance {_usdc(wallet.balance_atomic)} USDC on {_network(wallet.network)}"
                if wallet.balance_atomic is not None
                else ", balance not checked"
            )
            + (f", needs {_usdc(wallet.needed_atomic)} USDC" if wallet.needed_atomic is not None else "")
            + (f", RPC host {wallet.rpc_host}" if wallet.rpc_host else "")
        )
    if d.rule_blocks:
        lines.append(
            "- Rules that would refuse it: " + ", ".join(f"`{block.rule_id}`" for block in d.rule_blocks)
        )
    if d.accepts:
        lines += [
            "",
            "| scheme | network | asset | amount | payTo | payable |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for accept in d.accepts:
            payable = "yes" if accept.payable else f"no ({accept.reason})"
            lines.append(
                f"| {accept.scheme or '-'} | {accept.network or '-'} | {accept.asset or '-'} | "
                f"{accept.amount or '-'} | {accept.pay_to or '-'} | {payable} |"
            )
    lines += ["", f"{told.summary}", "", f"_Checked by {PRODUCT} at {isoformat(d.checked_at)}._"]
    if d.status == Status.NO_PROBLEM_FOUND and d.cause is None:
        lines[-1] = f"_Checked by {PRODUCT} at {isoformat(d.checked_at)}; no problem found._"
    return "\n".join(lines)
