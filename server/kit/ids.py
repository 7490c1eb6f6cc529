"""Prefixed random identifiers: the prefix tells a reader what kind of thing an id names."""

from __future__ import annotations

import secrets

PREFIXES = {
    "org": "org",
    "team": "team",
    "member": "mem",
    "agent": "agt",
    "policy": "pol",
    "wallet": "wal",
    "token": "tok",
    "intent": "pi",
    "approval": "apr",
    "notification": "ntf",
    "event": "evt",
    "rule": "rule",
    "finding": "oop",
    "catalog": "cat",
    "client": "cli",
    "grant": "grt",
    "family": "fam",
    "passkey": "pkey",
    "challenge": "wch",
    "step_up": "stp",
    "change": "chg",
    "circuit": "scb",
    "policy_change": "pcr",
    "sweep": "swp",
}


def new_id(kind: str) -> str:
    return f"{PREFIXES[kind]}_{secrets.token_hex(10)}"
