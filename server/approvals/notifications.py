"""Announcing pending approvals, passkeys added to or removed from a member, and policy changes
agents asked for, in Slack (an incoming webhook), from a background job.

Nothing here runs inside a payment: a hold writes its approval and nothing else, and this job
finds pending approvals that have no outbox row yet, writes one (unique per approval), and sends.
So a slow or failing webhook can never block or fail `fetch_paid`.

- **At most once.** A row is claimed (`pending` to `sending`) by one conditional write before its
  message leaves, and a claimed row is never claimed again: if the process dies mid-send, or the
  webhook's answer never comes, the row ends `failed` and nobody sends it again (it may have
  arrived). The job also runs in one process at a time (its lease).
- **Rate limit.** At most `limit` messages per organisation in any `window` (5 a minute by
  default); a summary counts as one message. When more approvals wait than there is room for,
  the room is filled with single messages and one summary of the rest ("N more payments wait"),
  so no approval goes unmentioned and the limit still holds; with no room left they wait.
- **Plain text.** The message is plain text with formatting off (`mrkdwn: false`) and no
  unfurling; every value that comes from an agent or a seller has `&`, `<` and `>` escaped as
  Slack asks and control characters flattened, so nothing can be formatted or made into a link
  with other words. There is no approve button: deciding happens on the approval page.
- **Whose channel.** An organisation that saved its own webhook (the settings page) is
  announced there; any other uses the server's `PAYWARDEN_SLACK_WEBHOOK_URL`, and with neither
  its rows are skipped. An organisation's webhook is a secret: it is sealed with the master key
  and pages show only its masked form.
- **Account changes.** A passkey added or removed is an audit event; the job gives each such
  event an outbox row of its own and announces it like an approval, at most once and under the
  same limit, ahead of approvals (a passkey someone did not expect is the more urgent news). A
  policy change an agent asked for is announced the same way, from its audit event: the change in
  words and a link to its page, with the agent's note between guillemets, labelled as the
  agent's own untrusted words.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit

import httpx

from server.approvals.policy_change_words import document_words
from server.approvals.policy_changes import MAX_NOTE, REQUEST_TTL, manage_url
from server.approvals.repository import NotificationRepository
from server.approvals.service import approval_url, effective_status
from server.jobs.runner import holder_id
from server.kit.clock import Clock
from server.kit.crypto import MasterKey, SealError
from server.kit.db import Database
from server.kit.errors import InputReason, InvalidInput
from server.kit.ids import new_id
from server.kit.money import format_usd
from server.kit.networks import is_testnet, network_name
from server.models import Approval, ApprovalNotification, AuditEvent
from server.vocabulary import ApprovalStatus, HoldReason, NotificationStatus
from server.wallets.sealed import webhook_context

log = logging.getLogger("paywarden.notifications")

RATE_LIMIT = 5
RATE_WINDOW = timedelta(minutes=1)
SEND_TIMEOUT_SECONDS = 5.0
LOOKBACK = timedelta(hours=24)  # the longest an approval can wait
STALE_CLAIM = timedelta(minutes=2)
BATCH = 200
MAX_FIELD = 120
MAX_SUMMARY = 400  # a policy change in words

REASON_WORDS = {
    HoldReason.RULE: "a hold rule selects it",
    HoldReason.CATALOG_NEW_HOST: "first payment to a host the catalog lists",
    HoldReason.NEW_PAY_TO: "first payment to this payee",
    HoldReason.INSTRUCTION_LIKE_DESCRIPTION: "the seller's request reads like instructions to an agent",
    HoldReason.THRESHOLD: "at or above the agent's approval threshold",
}


def slack_escape(text: str, *, limit: int = MAX_FIELD) -> str:
    """Text Slack shows as it is: `&`, `<` and `>` escaped (the only three it asks for), control
    characters and line breaks flattened to spaces, and values longer than `limit` cut."""
    flat = "".join(char if char.isprintable() else " " for char in text)
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def approval_message(approval: Approval, *, agent_name: str, public_url: str) -> str:
    network = network_name(approval.network)
    if is_testnet(approval.network):
        network += ", test network"
    reason = REASON_WORDS.get(approval.reason, str(approval.reason))
    return (
        f"Payment waiting for approval: {format_usd(approval.amount_atomic, atomic=True)} USD "
        f"({slack_escape(network)}) to {slack_escape(approval.host)}, "
        f"asked by agent {slack_escape(agent_name)}.\n"
        f"Why: {slack_escape(reason)} ({approval.reason}).\n"
        f"Expires: {approval.expires_at:%Y-%m-%d %H:%M} UTC.\n"
        f"Decide on the approval page: {approval_url(public_url, approval.id)}"
    )


# The audit events an organisation hears of: a passkey that can sign in or approve came or went,
# and an agent asked for more room in its policy.
ACCOUNT_CHANGES = ("passkey.added", "passkey.removed")
POLICY_CHANGE_ASKED = "policy_change.requested"
ANNOUNCED_EVENTS = (*ACCOUNT_CHANGES, POLICY_CHANGE_ASKED)


def account_change_message(event: AuditEvent, *, member_email: str | None, public_url: str) -> str:
    data = event.data if isinstance(event.data, dict) else {}
    who = slack_escape(member_email or "a member")
    name = slack_escape(str(data.get("name", "")))
    if event.type == "passkey.added":
        how = "with an enrolment link" if data.get("enrolment") else "after a check with an existing passkey"
        what = f"A passkey was added for {who}: {name} ({how})."
    else:
        what = f"A passkey was removed from {who}: {name}."
    return (
        f"{what}\n"
        f"When: {event.created_at:%Y-%m-%d %H:%M} UTC.\n"
        f"If nobody expected this, disable the member and check their passkeys: {public_url}/account/passkeys"
    )


def policy_change_message(event: AuditEvent, *, agent_name: str | None, public_url: str) -> str:
    """A policy change an agent asked for: the change in words, and the agent's note fenced
    between guillemets and labelled as its own words, which nobody checked."""
    data = event.data if isinstance(event.data, dict) else {}
    note = data.get("note")
    text = str(note.get("text", "")) if isinstance(note, dict) else ""
    words = document_words(data.get("change")) or "see its page"
    expires = event.created_at + REQUEST_TTL
    return (
        f"Agent {slack_escape(agent_name or 'of your organisation')} asks for more room in its spending "
        f"policy: {slack_escape(words, limit=MAX_SUMMARY)}.\n"
        f"The agent's note (its own words, untrusted, not checked by Paywarden): "
        f"«{slack_escape(text, limit=MAX_NOTE + 1)}»\n"
        "Nothing changes unless an owner or admin approves it there with a passkey.\n"
        f"Expires: {expires:%Y-%m-%d %H:%M} UTC.\n"
        f"Decide on its page: {manage_url(public_url, str(event.subject_id))}"
    )


def event_message(event: AuditEvent, outbox: NotificationRepository, *, public_url: str) -> str:
    """The message of an announced audit event."""
    if event.type == POLICY_CHANGE_ASKED:
        name = outbox.agent_name(org_id=event.org_id, agent_id=event.agent_id)
        return policy_change_message(event, agent_name=name, public_url=public_url)
    email = outbox.member_email(org_id=event.org_id, member_id=event.data.get("memberId"))
    return account_change_message(event, member_email=email, public_url=public_url)


def summary_message(count: int, *, public_url: str) -> str:
    return (
        f"{count} more payments are waiting for approval (more than this channel gets one by one).\n"
        f"See them all: {public_url}/approvals"
    )


SLACK_WEBHOOK_PREFIX = "https://hooks.slack.com/services/"
MAX_WEBHOOK_URL = 500


def check_webhook_url(text: str, *, allow_loopback: bool = False) -> str:
    """An organisation's Slack webhook as typed, checked: https on Slack's webhook host only (the
    server posts to it, so no other host can be reached through it). With `allow_loopback` (tests,
    when private hosts are allowed) a receiver on http://127.0.0.1 is accepted too."""
    url = text.strip()
    parts = urlsplit(url)
    plain = len(url) <= MAX_WEBHOOK_URL and url.isprintable() and " " not in url and "@" not in parts.netloc
    slack = url.startswith(SLACK_WEBHOOK_PREFIX) and len(url) > len(SLACK_WEBHOOK_PREFIX)
    loopback = allow_loopback and parts.scheme == "http" and parts.hostname == "127.0.0.1"
    if not plain or not (slack or loopback) or parts.query or parts.fragment:
        raise InvalidInput(InputReason.INVALID_WEBHOOK_URL)
    return url


def mask_webhook(url: str) -> str:
    """What pages show of a saved webhook: its host and the last four characters."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…{url[-4:]}"


def seal_webhook(master: MasterKey, *, org_id: str, url: str) -> bytes:
    return master.seal(url.encode(), context=webhook_context(org_id))


def payload(text: str) -> dict[str, object]:
    return {"text": text, "mrkdwn": False, "unfurl_links": False, "unfurl_media": False}


@dataclass(frozen=True)
class Outgoing:
    """One message, and the outbox rows it announces (one, or several for a summary)."""

    text: str
    row_ids: tuple[str, ...]
    summary: bool
    webhook_url: str = ""


class ApprovalNotifier:
    """The background job that announces pending approvals, each organisation's to its own
    webhook or else to the server's."""

    name = "approval-notifications"
    interval_seconds = 5.0

    def __init__(
        self,
        *,
        db: Database,
        clock: Clock,
        webhook_url: str | None,
        public_url: str,
        master: MasterKey | None = None,
        limit: int = RATE_LIMIT,
        window: timedelta = RATE_WINDOW,
        timeout_seconds: float = SEND_TIMEOUT_SECONDS,
        holder: str | None = None,
    ) -> None:
        self._db = db
        self._clock = clock
        self._webhook_url = webhook_url
        self._master = master
        self._public_url = public_url
        self._limit = limit
        self._window = window
        self._timeout = timeout_seconds
        self._holder = holder or holder_id()

    def _enqueue(self, now: datetime) -> None:
        with self._db.write() as session:
            outbox = NotificationRepository(session)
            outbox.abandon_stale(claimed_before=now - STALE_CLAIM, now=now)
            for event in outbox.unannounced_account_changes(
                types=ANNOUNCED_EVENTS, since=now - LOOKBACK, limit=BATCH
            ):
                outbox.add_unique(
                    ApprovalNotification(
                        id=new_id("notification"),
                        org_id=event.org_id,
                        audit_event_id=event.id,
                        status=NotificationStatus.PENDING,
                        created_at=now,
                    )
                )
            for approval in outbox.unannounced(since=now - LOOKBACK, now=now, limit=BATCH):
                outbox.add_unique(
                    ApprovalNotification(
                        id=new_id("notification"),
                        org_id=approval.org_id,
                        approval_id=approval.id,
                        status=NotificationStatus.PENDING,
                        created_at=now,
                    )
                )

    def _plan(self, now: datetime) -> list[Outgoing]:
        """Claim what may be sent now, under each organisation's limit."""
        outgoing: list[Outgoing] = []
        with self._db.write() as session:
            outbox = NotificationRepository(session)
            by_org: dict[str, list[tuple[ApprovalNotification, Approval, str]]] = defaultdict(list)
            for row, approval, agent_name in outbox.waiting(limit=BATCH):
                if effective_status(approval, now) != ApprovalStatus.PENDING:
                    outbox.close(row.id, status=NotificationStatus.SKIPPED, error=None, now=now)
                    continue
                by_org[row.org_id].append((row, approval, agent_name))
            changes: dict[str, list[Outgoing]] = defaultdict(list)
            for row, event in outbox.waiting_account_changes(limit=BATCH):
                text = event_message(event, outbox, public_url=self._public_url)
                changes[row.org_id].append(Outgoing(text, (row.id,), False))
            for org_id in {*changes, *by_org}:
                webhook = self._webhook_of(outbox, org_id)
                if webhook is None:
                    for message in changes.get(org_id, []):
                        outbox.close(
                            message.row_ids[0], status=NotificationStatus.SKIPPED, error=None, now=now
                        )
                    for row, _, _ in by_org.get(org_id, []):
                        outbox.close(row.id, status=NotificationStatus.SKIPPED, error=None, now=now)
                    continue
                changes[org_id] = [
                    replace(message, webhook_url=webhook) for message in changes.get(org_id, [])
                ]
                room = self._limit - outbox.messages_since(org_id=org_id, since=now - self._window)
                for message in changes.get(org_id, [])[: max(room, 0)]:
                    if outbox.claim(message.row_ids[0], holder=self._holder, announced=1, now=now):
                        outgoing.append(message)
                        room -= 1
                filled = self._fill(outbox, by_org.get(org_id, []), room=room, now=now)
                outgoing += [replace(message, webhook_url=webhook) for message in filled]
        return outgoing

    def _webhook_of(self, outbox: NotificationRepository, org_id: str) -> str | None:
        """The organisation's own webhook when it saved one (and it opens), else the server's."""
        sealed = outbox.sealed_webhook(org_id)
        if sealed is not None and self._master is not None:
            try:
                return self._master.open(sealed, context=webhook_context(org_id)).decode()
            except SealError:
                log.warning("an organisation's Slack webhook does not open with this master key")
        return self._webhook_url

    def _fill(
        self,
        outbox: NotificationRepository,
        rows: Sequence[tuple[ApprovalNotification, Approval, str]],
        *,
        room: int,
        now: datetime,
    ) -> list[Outgoing]:
        if room <= 0:
            return []
        singles = rows if len(rows) <= room else rows[: room - 1]
        rest = rows[len(singles) :]
        outgoing = [
            Outgoing(
                approval_message(approval, agent_name=name, public_url=self._public_url), (row.id,), False
            )
            for row, approval, name in singles
            if outbox.claim(row.id, holder=self._holder, announced=1, now=now)
        ]
        if rest:
            # The first row of a summary carries its count; the others are announced with it.
            claimed = [
                row.id
                for index, (row, _, _) in enumerate(rest)
                if outbox.claim(
                    row.id, holder=self._holder, announced=len(rest) if index == 0 else 0, now=now
                )
            ]
            if claimed:
                outgoing.append(
                    Outgoing(summary_message(len(claimed), public_url=self._public_url), tuple(claimed), True)
                )
        return outgoing

    async def _send(self, client: httpx.AsyncClient, message: Outgoing) -> str | None:
        """None when the webhook took the message; otherwise a short reason."""
        try:
            response = await client.post(message.webhook_url, json=payload(message.text))
        except httpx.TimeoutException:
            return "timeout"
        except httpx.HTTPError:
            return "unreachable"
        if response.status_code != 200:
            return f"http_{response.status_code}"
        return None

    def _finish(self, message: Outgoing, error: str | None) -> None:
        now = self._clock.now()
        if error is None:
            status = NotificationStatus.SUMMARISED if message.summary else NotificationStatus.SENT
        else:
            status = NotificationStatus.FAILED
            log.warning("an approval notification was not delivered: %s", error)
        with self._db.write() as session:
            outbox = NotificationRepository(session)
            for row_id in message.row_ids:
                outbox.close(row_id, status=status, error=error, now=now)

    async def run_once(self) -> int:
        now = self._clock.now()
        await self._db.run(self._enqueue, now)
        outgoing = await self._db.run(self._plan, now)
        if not outgoing:
            return 0
        timeout = httpx.Timeout(self._timeout)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            for message in outgoing:
                error = await self._send(client, message)
                await self._db.run(self._finish, message, error)
        return len(outgoing)
