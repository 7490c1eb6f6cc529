"""The import contracts in pyproject.toml hold, and they do catch an import that goes upward."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(root / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_code_keeps_every_import_contract() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_upward_import_breaks_the_build(tmp_path: Path) -> None:
    _copy_of_the_code(tmp_path)
    money = tmp_path / "server" / "kit" / "money.py"
    money.write_text(money.read_text() + "\nimport server.payments.ledger  # an upward import\n")

    result = _lint(tmp_path)

    assert result.returncode != 0
    assert "server.kit is not allowed to import server.payments" in result.stdout


def _copy_of_the_code(tmp_path: Path) -> None:
    for package in ("server", "auth"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")


def test_a_table_in_the_policy_engine_breaks_the_build(tmp_path: Path) -> None:
    _copy_of_the_code(tmp_path)
    engine = tmp_path / "server" / "policy" / "engine.py"
    engine.write_text(engine.read_text() + "\nimport server.models  # tables in the engine\n")

    result = _lint(tmp_path)

    assert result.returncode != 0
    assert "The policy engine is pure" in result.stdout
    assert "server.policy.engine is not allowed to import server.models" in result.stdout


def test_loading_the_policy_engine_loads_no_table_and_no_database_library() -> None:
    """The engine and its rules decide from values: importing them brings in neither the ORM nor a
    single table (the vocabulary they share with the tables is `server.vocabulary`)."""
    probe = (
        "import sys, server.policy.engine, server.policy.proposals;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'sqlmodel', 'sqlalchemy'}"
        " or m.startswith('server.models') or m == 'server.kit.db'))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_loading_the_server_loads_no_passkey_library() -> None:
    """A server process starts without the WebAuthn library (and the X.509 and CBOR parsers it
    brings): the first passkey ceremony loads it. Tests start hundreds of servers; most never see
    a passkey."""
    probe = (
        "import sys, server.app;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'webauthn', 'OpenSSL', 'cbor2'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_loading_the_server_loads_no_cdp_sdk() -> None:
    """cdp-sdk takes seconds of CPU to import (its API client loads every model it has): a server
    loads it, in a worker thread, only once it starts with a `cdp` wallet in the database or a
    first CDP call needs it (server/signers/cdp_api.py)."""
    probe = (
        "import sys, server.app;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'cdp', 'aiohttp'}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert loaded.stdout.strip() == "[]"
