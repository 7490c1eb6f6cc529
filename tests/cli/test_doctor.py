"""`paywarden doctor` as an operator runs it: no server, no database, no account and no key, against
crafted sellers on loopback and a real chain. Most tests run the command in this process through
typer's runner (in an empty working directory); `installed` runs the installed `paywarden` in a
real subprocess, for one exit code 0 and one exit code 2. Each cause and each warning
comes from a seller that produces it; the exit code is 0 (no problem), 2 (a problem) or 1 (could
not run, one line, no traceback); no seller text ever reaches the output; nothing is written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from server.cli import app
from tests.support.chain import Anvil, TestToken, free_port, fresh_wallet
from tests.support.crafted_seller import CraftedSeller, fixture_crafted_seller  # noqa: F401
from tests.support.fixtures_chain import FundedWallet
from tests.support.hostile_seller import CANARY
from tests.support.seller import Seller

pytestmark = pytest.mark.chain

PAYWARDEN = str(Path(sys.executable).with_name("paywarden"))
NETWORK = "eip155:84532"


@dataclass(frozen=True)
class Doctor:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        assert len(lines) == 1, self.stdout + self.stderr
        document: dict[str, Any] = json.loads(lines[0])
        return document


def _base(anvil: Anvil, test_usdc: TestToken) -> dict[str, str]:
    return {
        "PAYWARDEN_ALLOW_PRIVATE_HOSTS": "1",
        "PAYWARDEN_ASSETS": json.dumps({NETWORK: test_usdc.address}),
        "PAYWARDEN_RPC_URLS": json.dumps({NETWORK: anvil.rpc_url}),
        "PAYWARDEN_FETCH_TIMEOUT_MS": "2000",
    }


def _checked(done: Doctor, tmp_path: Path) -> Doctor:
    assert CANARY not in done.stdout + done.stderr  # no seller text, ever
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []  # no database, no key file, nothing written
    return done


@pytest.fixture
def run(tmp_path: Path, anvil: Anvil, test_usdc: TestToken, monkeypatch: pytest.MonkeyPatch) -> Any:
    """doctor in this process, in an empty working directory, with only the PAYWARDEN_* given."""
    base = _base(anvil, test_usdc)
    monkeypatch.chdir(tmp_path)

    def doctor(*args: str, env: dict[str, str] | None = None, without: tuple[str, ...] = ()) -> Doctor:
        environ: dict[str, str | None] = {k: None for k in os.environ if k.startswith("PAYWARDEN_")}
        environ.update({k: v for k, v in base.items() if k not in without})
        environ.update({k: None for k in without})
        environ.update(env or {})
        # An exception escaping the command fails the test: the operator would see a traceback.
        result = CliRunner().invoke(app, ["doctor", *args], env=environ, catch_exceptions=False)
        return _checked(Doctor(result.exit_code, result.stdout, result.stderr), tmp_path)

    return doctor


@pytest.fixture
def installed(tmp_path: Path, anvil: Anvil, test_usdc: TestToken) -> Any:
    """The installed `paywarden doctor` in a real subprocess."""
    base = _base(anvil, test_usdc)

    def doctor(*args: str, env: dict[str, str] | None = None, without: tuple[str, ...] = ()) -> Doctor:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PAYWARDEN_")}
        environ.update({k: v for k, v in base.items() if k not in without})
        environ.update(env or {})
        done = subprocess.run(
            [PAYWARDEN, "doctor", *args],
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return _checked(Doctor(done.returncode, done.stdout, done.stderr), tmp_path)

    return doctor


def test_no_problem_with_a_funded_wallet_exits_0(
    installed: Any, seller: Seller, funded_wallet: FundedWallet
) -> None:
    before = seller.payment_signature_counts
    done = installed(seller.url("/premium"), "--wallet", funded_wallet.address, "--json")
    assert done.code == 0
    found = done.json()
    assert (found["status"], found["cause"], found["warnings"]) == ("no_problem_found", None, [])
    assert found["wallet"] == {
        "address": funded_wallet.address,
        "source": "argument",
        "network": NETWORK,
        "balanceUsdc": "10.00",
        "amountUsdc": "0.01",
        "rpcHost": "127.0.0.1",
    }
    assert found["request"] == {
        "method": "GET",
        "url": seller.url("/premium"),
        "httpStatus": 402,
        "x402Version": 2,
    }
    assert [(a["network"], a["amountUsd"], a["payTo"], a["payable"]) for a in found["accepts"]] == [
        (NETWORK, "0.01", seller.pay_to, True)
    ]
    assert (found["chatRules"], found["ruleBlocks"]) == ([], [])
    # The preflight fetch_paid runs, without the account's steps.
    assert [(seen["step"], seen["status"]) for seen in found["steps"]] == [
        ("context", "skipped"),
        ("host", "skipped"),
        ("request", "passed"),
        ("offer", "passed"),
        ("wallet", "passed"),
        ("facts", "skipped"),
        ("decision", "skipped"),
    ]
    assert seller.payment_signature_counts == before  # doctor never pays


def test_the_wallet_warnings_and_insufficient_funds(
    run: Any, crafted_seller: CraftedSeller, seller: Seller
) -> None:
    url = crafted_seller.url(crafted_seller.path("honest"))
    assert run(url, "--json").json()["warnings"] == ["no_wallet"]
    empty, _ = fresh_wallet()
    unchecked = run(url, "--wallet", empty, "--json", without=("PAYWARDEN_RPC_URLS",))
    assert unchecked.code == 0
    assert unchecked.json()["warnings"] == ["balance_not_checked"]
    assert unchecked.json()["wallet"]["balanceUsdc"] is None
    broke = run(seller.url("/report"), "--wallet", empty, "--json")
    assert broke.code == 2
    found = broke.json()
    assert found["cause"] == {
        "code": "insufficient_funds",
        "reasons": [],
        "fetchPaidError": "insufficient_funds",
    }
    assert (found["wallet"]["balanceUsdc"], found["wallet"]["amountUsdc"]) == ("0.00", "0.50")
    assert empty not in found["issueReport"]
    assert f"{empty[:6]}…{empty[-4:]}" in found["issueReport"]


@pytest.mark.parametrize(
    ("scenario", "code", "reasons", "fetch_paid_error"),
    [
        ("stall402", "seller_timeout", [], "seller_timeout"),
        ("redirect_away", "redirect_not_followed", [], None),
        ("error404", "seller_error", [], None),
        ("no_challenge", "invalid_payment_required", ["no_challenge"], "invalid_payment_required"),
        ("unpayable", "no_payable_entry", ["unsupported_network"], "no_payable_entry"),
        ("wrong_asset", "no_payable_entry", ["unsupported_asset"], "no_payable_entry"),
        ("other_host", "resource_mismatch", [], "resource_mismatch"),
    ],
)
def test_each_cause_from_a_seller_that_produces_it(
    run: Any,
    crafted_seller: CraftedSeller,
    scenario: str,
    code: str,
    reasons: list[str],
    fetch_paid_error: str | None,
) -> None:
    done = run(crafted_seller.url(crafted_seller.path(scenario)) + "?token=abc", "--json")
    assert done.code == 2
    found = done.json()
    assert found["status"] == "problem"
    assert found["cause"] == {"code": code, "reasons": reasons, "fetchPaidError": fetch_paid_error}
    assert "token=abc" not in done.stdout
    if scenario == "other_host":
        assert found["resourceHost"] == "other-host.example"


def test_an_unreachable_seller_and_a_free_url(run: Any, crafted_seller: CraftedSeller) -> None:
    gone = run(f"http://127.0.0.1:{free_port()}/x", "--json")
    assert (gone.code, gone.json()["cause"]["code"]) == (2, "seller_unreachable")
    free = run(crafted_seller.url(crafted_seller.path("ok")), "--json")
    assert free.code == 0
    assert (free.json()["status"], free.json()["request"]["httpStatus"]) == ("no_problem_found", 200)


@pytest.mark.parametrize(
    ("scenario", "warnings"),
    [
        ("inject", ["no_wallet", "instruction_like_text"]),
        ("mixed", ["no_wallet", "instruction_like_text", "mixed_mainnet_testnet", "some_entries_unpayable"]),
        ("versions", ["no_wallet", "x402_version_mismatch"]),
    ],
)
def test_each_warning_from_a_seller_that_produces_it(
    run: Any, crafted_seller: CraftedSeller, scenario: str, warnings: list[str]
) -> None:
    done = run(crafted_seller.url(crafted_seller.path(scenario)), "--json")
    assert done.code == 0  # warnings never block a payment
    found = done.json()
    assert (found["status"], found["warnings"]) == ("no_problem_found", warnings)
    if scenario == "mixed":
        assert [(a["network"], a["payable"], a["reason"]) for a in found["accepts"]] == [
            (NETWORK, True, None),
            ("eip155:1", False, "unsupported_network"),
        ]


def test_seller_fields_that_are_not_tokens_read_unreadable(run: Any, crafted_seller: CraftedSeller) -> None:
    done = run(crafted_seller.url(crafted_seller.path("prose")), "--json")
    assert done.code == 2
    found = done.json()
    assert found["cause"]["code"] == "no_payable_entry"
    (offer,) = found["accepts"]
    assert offer == {
        "scheme": "[unreadable]",
        "network": "[unreadable]",
        "asset": "[unreadable]",
        "amount": "[unreadable]",
        "amountUsd": None,
        "payTo": "[unreadable]",
        "payable": False,
        "reason": "unsupported_scheme",
    }


def test_the_text_report_for_people(installed: Any, crafted_seller: CraftedSeller) -> None:
    done = installed(crafted_seller.url(crafted_seller.path("unpayable")))
    assert done.code == 2
    assert done.stdout.startswith("Problem: ")
    assert (
        "Cause: no_payable_entry (unsupported_network); fetch_paid would fail with no_payable_entry"
        in done.stdout
    )
    assert "What to do: " in done.stdout
    assert "### x402 payment diagnosis" in done.stdout
    assert "| exact | eip155:1 |" in done.stdout


@pytest.mark.parametrize(
    ("arguments", "env", "reason"),
    [
        (["not a url"], {}, "invalid_input"),
        (["ftp://example.com/x"], {}, "https_required"),
        (["https://api.example.com/x", "--wallet", "0x123"], {}, "invalid_wallet"),
        (["https://api.example.com/x", "--method", "TRACE"], {}, "invalid_method"),
        (["https://127.0.0.1:9/x"], {"PAYWARDEN_ALLOW_PRIVATE_HOSTS": "0"}, "private_address_blocked"),
        (["https://api.example.com/x"], {"PAYWARDEN_RPC_URLS": "{not json"}, "PAYWARDEN_RPC_URLS"),
        (["https://api.example.com/x"], {"PAYWARDEN_FETCH_TIMEOUT_MS": "5"}, "PAYWARDEN_FETCH_TIMEOUT_MS"),
        (["https://api.example.com/x", "--wallet", "0x" + "ab" * 32], {}, "invalid_wallet"),
    ],
)
def test_a_doctor_that_cannot_run_exits_1_with_one_line(
    run: Any, arguments: list[str], env: dict[str, str], reason: str
) -> None:
    done = run(*arguments, "--json", env=env)
    assert done.code == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: doctor could not run: ")
    assert reason in lines[0]
