"""Rebuild TestUSDC.json from TestUSDC.sol with npm's solc and OpenZeppelin.

Usage: python tests/support/contracts/build.py [--check] SOLC_DIR

SOLC_DIR is a directory outside the repository where `solc@0.8.37` and
`@openzeppelin/contracts@5.7.0` were installed with npm (see README.md). The compiler runs
under node with an import callback that reads OpenZeppelin from SOLC_DIR/node_modules, so
the repository itself never holds a compiler. With --check the script compares instead of
writing, and exits 1 when the committed artifact is stale.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "TestUSDC.sol"
ARTIFACT = HERE / "TestUSDC.json"
CONTRACT = "TestUSDC"
SOLC_VERSION = "0.8.37"
OPENZEPPELIN_VERSION = "5.7.0"

# Runs inside SOLC_DIR so that require("solc") finds the pinned compiler there.
NODE_COMPILE = r"""
const fs = require("fs");
const path = require("path");
const solc = require("solc");
const modules = path.resolve("node_modules");
function findImports(name) {
  const file = path.resolve(modules, name);
  if (!file.startsWith(modules + path.sep)) return { error: "import outside node_modules: " + name };
  try { return { contents: fs.readFileSync(file, "utf8") }; }
  catch (e) { return { error: "not found: " + name }; }
}
const input = fs.readFileSync(0, "utf8");
process.stdout.write(JSON.stringify({
  version: solc.version(),
  output: JSON.parse(solc.compile(input, { import: findImports })),
}));
"""


def standard_json_input() -> dict[str, Any]:
    return {
        "language": "Solidity",
        # A relative unit name keeps the metadata hash (and so the bytecode) free of local paths.
        "sources": {f"{CONTRACT}.sol": {"content": SOURCE.read_text(encoding="utf-8")}},
        "settings": {
            "optimizer": {"enabled": True, "runs": 200},
            # Cancun bytecode runs on every hardfork anvil 1.x offers.
            "evmVersion": "cancun",
            "outputSelection": {f"{CONTRACT}.sol": {CONTRACT: ["abi", "evm.bytecode.object"]}},
        },
    }


def package_version(solc_dir: Path, package: str) -> str:
    manifest = solc_dir / "node_modules" / package / "package.json"
    return str(json.loads(manifest.read_text(encoding="utf-8"))["version"])


def compile_artifact(solc_dir: Path) -> dict[str, Any]:
    for package, wanted in (("solc", SOLC_VERSION), ("@openzeppelin/contracts", OPENZEPPELIN_VERSION)):
        found = package_version(solc_dir, package)
        if found != wanted:
            raise SystemExit(f"{package} {found} in {solc_dir}, need {wanted}")
    run = subprocess.run(
        ["node", "-e", NODE_COMPILE],
        input=json.dumps(standard_json_input()),
        capture_output=True,
        text=True,
        cwd=solc_dir,
        check=True,
    )
    result = json.loads(run.stdout)
    errors = [e for e in result["output"].get("errors", []) if e["severity"] == "error"]
    if errors:
        raise SystemExit("\n".join(e["formattedMessage"] for e in errors))
    contract = result["output"]["contracts"][f"{CONTRACT}.sol"][CONTRACT]
    return {
        "contractName": CONTRACT,
        "compiler": f"solc {result['version']}, @openzeppelin/contracts {OPENZEPPELIN_VERSION}",
        "abi": contract["abi"],
        "bytecode": "0x" + contract["evm"]["bytecode"]["object"],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("solc_dir", type=Path, help="directory holding node_modules/solc and OpenZeppelin")
    parser.add_argument("--check", action="store_true", help="compare with TestUSDC.json, do not write")
    args = parser.parse_args(argv)
    text = json.dumps(compile_artifact(args.solc_dir.resolve()), indent=2) + "\n"
    if args.check:
        if ARTIFACT.read_text(encoding="utf-8") != text:
            print(f"{ARTIFACT.name} is stale: rebuild it", file=sys.stderr)
            return 1
        print(f"{ARTIFACT.name} is up to date")
        return 0
    ARTIFACT.write_text(text, encoding="utf-8")
    print(f"wrote {ARTIFACT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
