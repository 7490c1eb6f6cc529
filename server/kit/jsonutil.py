"""Canonical JSON: sorted keys, no spaces, UTF-8 kept; the form hashes are computed over."""

from __future__ import annotations

import json
from typing import Any


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
