"""Every runtime dependency in pyproject.toml is used: imported in server/ or auth/, or listed
here with the reason nothing imports it by name."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Distribution -> why no module of ours imports it, though it is needed at run time.
USED_WITHOUT_IMPORT = {
    "coincurve": "eth-keys uses its C secp256k1 when installed: a signature in about 1 ms, not 7",
    "psycopg": "the PostgreSQL driver SQLAlchemy loads for postgresql+psycopg:// URLs",
    "jinja2": "starlette.templating.Jinja2Templates renders the members' pages with it",
    "python-multipart": "starlette parses the members' pages' form posts with it",
}


def _name(requirement: str) -> str:
    return re.split(r"[\[<>=!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_modules() -> set[str]:
    found: set[str] = set()
    for folder in ("server", "auth"):
        for path in (ROOT / folder).rglob("*.py"):
            found.update(re.findall(r"^\s*(?:from|import)\s+(\w+)", path.read_text(), re.MULTILINE))
    return found


def test_every_runtime_dependency_is_imported_or_excused() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        requirements = tomllib.load(handle)["project"]["dependencies"]
    modules_of: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            modules_of.setdefault(distribution.lower().replace("_", "-"), set()).add(module)
    imported = _imported_modules()
    unused = [
        name
        for name in map(_name, requirements)
        if name not in USED_WITHOUT_IMPORT and not (modules_of.get(name, set()) & imported)
    ]
    assert unused == [], f"declared in pyproject.toml, never imported in server/ or auth/: {unused}"


def test_every_excuse_is_still_a_declared_dependency() -> None:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        declared = {_name(r) for r in tomllib.load(handle)["project"]["dependencies"]}
    assert set(USED_WITHOUT_IMPORT) <= declared


def test_web3_is_not_a_runtime_dependency() -> None:
    """Measured (tests/bench/test_chain_adapter.py, docs/performance.md): web3 adds about 5 ms to
    the balance read of each paid call, so the chain adapter stays hand-written."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        declared = {_name(r) for r in tomllib.load(handle)["project"]["dependencies"]}
    assert "web3" not in declared
