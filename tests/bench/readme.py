"""Copy the last `make bench` table into README.md, between its two benchmark markers.

.venv/bin/python -m tests.bench.readme     (or: make bench-readme)
"""

from __future__ import annotations

import sys

from tests.bench.harness import RESULTS_MD, ROOT

README = ROOT / "README.md"
BEGIN = "<!-- bench:begin (make bench-readme rewrites what follows) -->"
END = "<!-- bench:end -->"


def rewrite(readme: str, results: str) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"README.md needs exactly one {BEGIN!r} followed by one {END!r}")
    before, rest = readme.split(BEGIN)
    _, after = rest.split(END)
    return f"{before}{BEGIN}\n{results.strip()}\n{END}{after}"


def main() -> None:
    if not RESULTS_MD.is_file():
        sys.exit(f"no results at {RESULTS_MD}: run `make bench` first")
    README.write_text(rewrite(README.read_text(encoding="utf-8"), RESULTS_MD.read_text(encoding="utf-8")))
    print(f"README.md: table replaced with {RESULTS_MD}")


if __name__ == "__main__":
    main()
