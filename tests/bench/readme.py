"""Copy the last `make bench` table into docs/performance.md, between its two benchmark markers.

.venv/bin/python -m tests.bench.readme     (or: make bench-readme)
"""

from __future__ import annotations

import sys

from tests.bench.harness import RESULTS_MD, ROOT

PERFORMANCE = ROOT / "docs" / "performance.md"
BEGIN = "<!-- bench:begin (make bench-readme rewrites what follows) -->"
END = "<!-- bench:end -->"


def rewrite(page: str, results: str) -> str:
    if page.count(BEGIN) != 1 or page.count(END) != 1 or page.index(BEGIN) > page.index(END):
        raise ValueError(f"{PERFORMANCE.name} needs exactly one {BEGIN!r} followed by one {END!r}")
    before, rest = page.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{results.strip()}\n{END}{after}"


def main() -> None:
    if not RESULTS_MD.is_file():
        sys.exit(f"no results at {RESULTS_MD}: run `make bench` first")
    PERFORMANCE.write_text(
        rewrite(PERFORMANCE.read_text(encoding="utf-8"), RESULTS_MD.read_text(encoding="utf-8"))
    )
    print(f"docs/performance.md: table replaced with {RESULTS_MD}")


if __name__ == "__main__":
    main()
