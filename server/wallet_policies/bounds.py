"""What any single payment an agent's policy allows can be, as far as a wallet can check it alone.

Pure: a policy and the catalog's facts in, bounds out. A wallet sees one signature at a time and
nothing of hosts, spend so far or people, so the bounds are what holds for every payment the policy
could ever allow:

- **the token**: each of the policy's networks' configured USDC (the verifying contract);
- **the amount**: the tightest limit on one payment: the per-payment cap, and also the daily cap,
  the velocity window's USD limit and the challenge rules' maximum, since one payment can exceed
  none of them;
- **the payee**: known only when the policy itself pays nobody else. That is the case when every
  host the agent may pay is a catalog seller with pinned payees *and* the policy holds it to them:
  with "verified sellers only" for its allowed hosts, or for a host allowed only because the catalog
  lists it. Any other host (not listed, a seller that rotates its address, a wildcard that reaches
  beyond the catalog) can be paid at an address no one knows in advance: then the payee is not
  bounded here (`payees` None), and only the payees the policy denies are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from server.kit.money import usd_to_atomic
from server.policy.hosts import host_matches_any
from server.policy.model import Policy

# CDP compares at most this many addresses in one condition: more pinned payees than this cannot
# be pinned, and are then not bounded at all.
MAX_ADDRESSES = 300


@dataclass(frozen=True)
class PaymentBounds:
    verifying_contracts: tuple[str, ...]  # lower-case, sorted; empty: no network with USDC
    max_value_atomic: int
    payees: tuple[str, ...] | None  # lower-case, sorted; None: any payee
    denied_payees: tuple[str, ...]  # lower-case, sorted

    @property
    def pays_nobody(self) -> bool:
        return not self.verifying_contracts or self.max_value_atomic <= 0 or self.payees == ()


def _payees(policy: Policy, pins: Mapping[str, frozenset[str]]) -> frozenset[str] | None:
    """Every payee the policy could pay, or None when some payable host's payee is not known."""
    found: set[str] = set()
    for pattern in policy.allow_hosts:
        if not policy.verified_sellers_only:
            return None  # an allowed host pays whatever payee it names (a new one is held, not refused)
        listed = [host for host in pins if host_matches_any((pattern,), host)]
        for host in listed:
            if not host_matches_any(policy.deny_hosts, host):
                if not pins[host]:
                    return None  # a listed seller that rotates its address
                found |= pins[host]
    if policy.allow_catalog_hosts:
        for host, payees in pins.items():
            if host_matches_any(policy.deny_hosts, host) or host_matches_any(policy.allow_hosts, host):
                continue
            if not payees:
                return None
            found |= payees
    return frozenset(found)


def _tightest(policy: Policy) -> Decimal:
    limits = [policy.max_usd_per_tx, policy.daily_cap_usd]
    limits += [limit for limit in (policy.velocity.max_usd, policy.challenge.max_usd) if limit is not None]
    return min(limits)


def payment_bounds(
    policy: Policy, *, usdc_by_network: Mapping[str, str], pins: Mapping[str, frozenset[str]]
) -> PaymentBounds:
    """The bounds of any one payment `policy` allows. `pins` is every listed catalog host with its
    pinned payees (lower-case; empty for a seller that rotates its address)."""
    contracts = sorted({usdc_by_network[n].lower() for n in policy.networks if n in usdc_by_network})
    denied = sorted({address.lower() for address in policy.pay_to_deny})
    payees = _payees(policy, pins)
    if payees is not None:
        payees = frozenset(payees - set(denied))
        if len(payees) > MAX_ADDRESSES:
            payees = None
    return PaymentBounds(
        verifying_contracts=tuple(contracts),
        max_value_atomic=usd_to_atomic(_tightest(policy)),
        payees=None if payees is None else tuple(sorted(payees)),
        denied_payees=tuple(denied),
    )
