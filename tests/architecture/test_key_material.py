"""Only the signer reaches a wallet's key or an organisation's CDP credentials: no other module
imports its key module (an import contract that catches one that does), no other code calls the
unseal of either, and the master key's general `open` refuses both contexts."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from server.kit.crypto import MasterKey, SealError
from server.kit.ids import new_id
from server.signers.cdp_credentials import CdpCredentials
from server.signers.key_material import (
    cdp_credentials_context,
    seal_wallet_key,
    unseal_cdp_credentials,
    unseal_wallet_key,
    wallet_context,
)
from server.signers.loading import opens_wallet_key, seal_cdp_credentials
from tests.architecture.test_import_contracts import _copy_of_the_code, _lint

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "Only the signer opens a wallet key: no other module imports its key material"
# The calls that return a wallet key's or CDP credentials' plaintext.
UNSEAL_CALL = re.compile(r"\b(unseal_wallet_key|unseal_cdp_credentials|_open_signer_secret)\s*\(")
SIGNER = ROOT / "server" / "signers"


def _sources() -> list[Path]:
    return sorted(p for package in ("server", "auth") for p in (ROOT / package).rglob("*.py"))


def _calls(pattern: re.Pattern[str]) -> set[str]:
    """Where `pattern` is called (not defined), as repository-relative paths."""
    found = set()
    for path in _sources():
        for line in path.read_text().splitlines():
            if pattern.search(line) and not line.lstrip().startswith("def "):
                found.add(str(path.relative_to(ROOT)))
    return found


def test_only_the_signer_calls_the_unseal_of_a_wallet_key() -> None:
    callers = _calls(UNSEAL_CALL)

    assert callers == {"server/signers/key_material.py", "server/signers/loading.py"}


def test_only_the_signers_key_module_names_a_wallet_keys_context() -> None:
    # A module building "wallet:<id>" itself could seal or open a key behind the signer's back.
    builds_context = _calls(re.compile(r"""["']wallet:"""))

    assert builds_context <= {"server/kit/crypto.py"}  # the reserved prefix, declared once


def test_only_a_signer_backend_hands_typed_data_to_a_key() -> None:
    # The backend signs what server/signers/authorisation.py built; no other code signs typed data
    # (the `cdp` backend asks CDP to, with the key CDP holds).
    assert _calls(re.compile(r"\.sign_typed_data\s*\(")) == {
        "server/signers/local_key.py",
        "server/signers/cdp.py",
    }


def test_the_contract_lists_every_package_but_the_signers() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        contracts = tomllib.load(handle)["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["name"] == CONTRACT]
    packages = {
        f"server.{p.stem}" for p in (ROOT / "server").iterdir() if p.suffix == ".py" and p.stem != "__init__"
    } | {f"server.{p.name}" for p in (ROOT / "server").iterdir() if (p / "__init__.py").exists()}

    assert set(contract["source_modules"]) == (packages - {"server.signers"}) | {"auth"}
    assert contract["forbidden_modules"] == ["server.signers.key_material"]


def test_importing_the_key_module_outside_the_signer_breaks_the_build(tmp_path: Path) -> None:
    _copy_of_the_code(tmp_path)
    service = tmp_path / "server" / "wallets" / "service.py"
    service.write_text(service.read_text() + "\nimport server.signers.key_material  # a key outside\n")

    result = _lint(tmp_path)

    assert result.returncode != 0
    assert CONTRACT in result.stdout
    assert "server.wallets is not allowed to import server.signers.key_material" in result.stdout
    assert "server.wallets.service -> server.signers.key_material" in result.stdout


def test_the_master_keys_open_refuses_a_wallet_key() -> None:
    master = MasterKey.generate()
    sealed = seal_wallet_key(master, wallet_id="wal_1", private_key=b"\x01" * 32)

    with pytest.raises(SealError, match="only in the signer"):
        master.open(sealed, context=wallet_context("wal_1"))
    assert unseal_wallet_key(master, wallet_id="wal_1", sealed=sealed) == b"\x01" * 32
    with pytest.raises(SealError):
        unseal_wallet_key(master, wallet_id="wal_2", sealed=sealed)
    assert opens_wallet_key(master, wallet_id="wal_1", sealed=sealed)
    assert not opens_wallet_key(MasterKey.generate(), wallet_id="wal_1", sealed=sealed)


def test_the_master_keys_open_refuses_cdp_credentials() -> None:
    master = MasterKey.generate()
    credentials = CdpCredentials("organizations/o/apiKeys/k", "api-secret", "wallet-secret")
    sealed = seal_cdp_credentials(master, org_id="org_1", credentials=credentials)

    with pytest.raises(SealError, match="only in the signer"):
        master.open(sealed, context=cdp_credentials_context("org_1"))
    assert CdpCredentials.decode(unseal_cdp_credentials(master, org_id="org_1", sealed=sealed)) == credentials
    with pytest.raises(SealError):
        unseal_cdp_credentials(master, org_id="org_2", sealed=sealed)
    # No wallet's context is an organisation's (ids hold no `/`).
    assert wallet_context(new_id("wallet")) != cdp_credentials_context("org_1")
    assert "api-secret" not in repr(credentials)
    assert "wallet-secret" not in repr(credentials)
