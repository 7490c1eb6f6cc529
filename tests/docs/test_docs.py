"""The manual: a README a newcomer reads in ten minutes, and a reference in docs/ that stays true.

Every `PAYWARDEN_*` setting the server reads is in the configuration reference, and every
`PAYWARDEN_*` name the manual mentions is either such a setting or one of the few variables the
tests, benchmarks and infra tools read (listed here, read by their code, and documented in
docs/development.md). Every link between the pages reaches a file and, where it names one, a
heading; the README links every page of docs/.
"""

from __future__ import annotations

import re
from pathlib import Path

from server.settings import ProbeSettings, Settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
DEVELOPMENT = DOCS / "development.md"

# Read by the tests, the benchmarks and the infra tools, never by the server.
DEVELOPMENT_VARIABLES = frozenset(
    {
        "PAYWARDEN_REQUIRE_ALL_TESTS",
        "PAYWARDEN_TEST_EPOCH_SHIFT",
        "PAYWARDEN_TEST_POSTGRES_URL",
        "PAYWARDEN_TEST_OUTPUT",
        "PAYWARDEN_CHROMIUM",
        "PAYWARDEN_ANVIL_BIN",
        "PAYWARDEN_NODE22",
        "PAYWARDEN_CONFORMANCE_URL",
        "PAYWARDEN_CONFORMANCE_TOKEN",
        "PAYWARDEN_CONFORMANCE_ENTRY",
        "PAYWARDEN_LOADTEST_TOKEN",
        "PAYWARDEN_BENCH_QUICK",
        "PAYWARDEN_BENCH_PROFILE",
        "PAYWARDEN_BENCH_FETCH_ROUNDS",
        "PAYWARDEN_BENCH_RPC_DELAY_MS",
        "PAYWARDEN_BENCH_ENGINE_SECONDS",
        "PAYWARDEN_BENCH_RESERVE_SECONDS",
        "PAYWARDEN_BENCH_AGENTS",
        "PAYWARDEN_BENCH_RULES",
        "PAYWARDEN_BENCH_ORGS",
        "PAYWARDEN_BENCH_RACE_CALLS",
        "PAYWARDEN_BENCH_RACE_PAID",
        "PAYWARDEN_BENCH_RACE_SELLERS",
        "PAYWARDEN_BENCH_RACE_CONNECTIONS",
        "PAYWARDEN_BENCH_ROWS",
        "PAYWARDEN_BENCH_READ_CALLS",
        "PAYWARDEN_BENCH_SCRAPE_EVENTS",
        "PAYWARDEN_BENCH_SCRAPE_PAYMENTS",
        "PAYWARDEN_BENCH_SESSIONS",
        "PAYWARDEN_BENCH_SESSION_SECONDS",
        "PAYWARDEN_BENCH_THROUGHPUT_SECONDS",
        "PAYWARDEN_BENCH_BUSY_SESSIONS",
        "PAYWARDEN_BENCH_PAID_EVERY",
        "PAYWARDEN_BENCH_CDP_SIGNATURES",
    }
)

NAME = re.compile(r"PAYWARDEN_[A-Z0-9_]*[A-Z0-9]")
# A benchmark knob read through tests/bench/harness.py: setting("ROWS", ...) is PAYWARDEN_BENCH_ROWS.
BENCH_KNOB = re.compile(r"\b(?:setting|seconds|int_list)\(\s*\"([A-Z0-9_]+)\"")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def settings_variables() -> set[str]:
    """The variables the server reads: pydantic-settings maps each field to prefix + NAME."""
    names = set()
    for model in (Settings, ProbeSettings):
        prefix = model.model_config.get("env_prefix", "")
        for field_name, field in model.model_fields.items():
            assert field.alias is None, field_name  # an alias would be read under another name
            assert field.validation_alias is None, field_name
            names.add(f"{prefix}{field_name}".upper())
    return names


def manual() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), ROOT / "infra" / "README.md"]


def code_outside_the_server() -> str:
    """What the tests, benchmarks, CI and infra tools are written in (not the manual)."""
    files = [ROOT / "Makefile", ROOT / ".ci" / "run"]
    for folder in ("tests", "infra"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".mjs", ".sh") and "node_modules" not in path.parts:
                files.append(path)
    return "\n".join(path.read_text(encoding="utf-8") for path in files if path.is_file())


def test_every_setting_is_a_row_of_the_configuration_reference() -> None:
    table = CONFIGURATION.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(PAYWARDEN_[A-Z0-9_]+)` \|", table, re.M))
    variables = settings_variables()
    assert "PAYWARDEN_DATABASE_URL" in variables  # the fields were found at all
    assert sorted(variables - rows) == [], "settings missing from docs/configuration.md"
    assert sorted(rows - variables) == [], "rows of docs/configuration.md the server never reads"


def test_every_variable_the_manual_names_is_read_by_something() -> None:
    known = settings_variables() | DEVELOPMENT_VARIABLES
    unknown = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in manual()
        for name in NAME.findall(path.read_text(encoding="utf-8"))
        if name not in known
    }
    assert sorted(unknown) == []


def test_the_development_variables_are_read_by_their_code_and_documented() -> None:
    code = code_outside_the_server()
    knobs = {f"PAYWARDEN_BENCH_{knob}" for knob in BENCH_KNOB.findall(code)}
    assert "PAYWARDEN_BENCH_ROWS" in knobs  # the harness's knobs were found at all
    read = set(NAME.findall(code)) | knobs
    assert sorted(DEVELOPMENT_VARIABLES - read) == [], "listed here but read by nothing"
    assert sorted(knobs - DEVELOPMENT_VARIABLES) == [], "benchmark knobs missing from the list"
    documented = set(NAME.findall(DEVELOPMENT.read_text(encoding="utf-8")))
    assert sorted(DEVELOPMENT_VARIABLES - documented) == [], "missing from docs/development.md"
    assert not DEVELOPMENT_VARIABLES & settings_variables()


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        heading = re.match(r"^#{1,6} (.+)$", line)
        if heading and not fence:
            anchor = base = _anchor(heading.group(1))
            n = 0
            while anchor in found:
                n += 1
                anchor = f"{base}-{n}"
            found.add(anchor)
    return found


def test_a_heading_anchor_is_the_one_github_makes() -> None:
    assert _anchor("A payment, step by step") == "a-payment-step-by-step"
    assert _anchor("`fetch_paid`") == "fetch_paid"
    assert _anchor("Errors of /mcp before a tool runs") == "errors-of-mcp-before-a-tool-runs"


def test_every_link_between_the_pages_arrives() -> None:
    broken = []
    for page in manual():
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto: and the like leave the repository
            file_part, _, anchor = target.partition("#")
            destination = (page.parent / file_part).resolve() if file_part else page
            if not destination.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and (destination.suffix != ".md" or anchor not in anchors(destination)):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert broken == []


def test_the_readme_is_a_newcomers_read_that_links_every_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 400
    top = "\n".join(text.splitlines()[:40])
    assert "make run" in top
    assert "make test" in top
    for folder in ("server/", "auth/", "tests/", "alembic/", "infra/", "docs/"):  # the layout
        assert re.search(rf"^{folder}\s+\S", text, re.M), f"the README does not describe {folder}"
    linked = {(README.parent / target.partition("#")[0]).resolve() for target in LINK.findall(text)}
    pages = set(DOCS.glob("*.md"))
    assert DOCS / "security.md" in pages
    assert sorted(str(page.relative_to(ROOT)) for page in pages if page.resolve() not in linked) == []
