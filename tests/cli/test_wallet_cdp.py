"""`paywarden admin wallet connect-cdp` (and the SPEC's `wallet cdp AGENT --account-name NAME`):
an agent's account at CDP, by a stable name, under its own policy compiled from the agent's,
registered as its wallet; the organisation's secrets read from standard input or named variables,
never from arguments, sealed only once CDP accepted them, and never printed or audited.
`cdp-policy check` names each way CDP's policy differs from the agent's; `cdp-policy sync` mends it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import select

from server.kit.db import Database
from server.models import AuditEvent, Organization, Wallet
from server.signers.cdp_credentials import CdpCredentials
from server.signers.key_material import unseal_cdp_credentials
from server.wallets.cdp import account_name_for
from tests.support.cdp import connect_cdp, connected, secrets_text
from tests.support.cdp_standin import CdpStandIn, StoredPolicy, new_credentials, running_standin
from tests.support.cli import PAYWARDEN, command_environ, run_cli
from tests.support.paywarden import TEST_MASTER_KEY, settings_for
from tests.support.tenants import AgentSetup, make_agent, pin_payee

SELLER = "https://api.example.com/v1/report"
PAYEE = "0x209693bc6afc0c5328ba36faf03c514ef312287c"


@pytest.fixture(scope="module", name="standin")
def fixture_standin() -> Iterator[tuple[CdpStandIn, str]]:
    with running_standin() as running:
        yield running


@pytest.fixture(name="agent")
def fixture_agent(module_sqlite_db: Database) -> AgentSetup:
    return make_agent(
        module_sqlite_db,
        settings_for(database_url=module_sqlite_db.url, port=1),
        allow_hosts=["api.example.com"],
    )


def _events(db: Database, org_id: str) -> list[AuditEvent]:
    with db.read() as session:
        return list(session.exec(select(AuditEvent).where(AuditEvent.org_id == org_id)).all())


def _secret_free(text: str, credentials: CdpCredentials) -> bool:
    return credentials.api_key_secret not in text and credentials.wallet_secret not in text


def test_connecting_makes_the_account_under_the_agents_policy_and_registers_it(
    module_sqlite_db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    db = module_sqlite_db

    result = connect_cdp(db, api_url=url, agent=agent.agent_id, credentials=running.credentials)

    document = result.json()
    name = account_name_for(agent.org_id, agent.agent_id)
    account = running.account_named(name)
    assert account is not None
    assert document["mode"] == "cdp"
    assert document["accountName"] == name
    assert document["address"] == account.address
    assert account.policy_id == document["cdpPolicyId"]
    held = running.policies[document["cdpPolicyId"]]
    assert held.scope == "account"
    assert next(r["action"] for r in held.rules) == "accept"  # the agent may pay api.example.com
    with db.read() as session:
        wallet = session.exec(select(Wallet).where(Wallet.agent_id == agent.agent_id)).one()
        org = session.get(Organization, agent.org_id)
    assert (wallet.mode, wallet.address, wallet.sealed_secret) == ("cdp", account.address, None)
    assert (wallet.cdp_policy_id, wallet.cdp_policy_version) == (held.id, document["policyVersion"])
    assert org is not None
    assert org.cdp_credentials_sealed is not None
    master = settings_for(database_url=db.url, port=1).master
    assert org.cdp_credentials_key_id == master.key_id
    opened = unseal_cdp_credentials(master, org_id=org.id, sealed=bytes(org.cdp_credentials_sealed))
    assert CdpCredentials.decode(opened) == running.credentials
    events = _events(db, agent.org_id)
    assert {"wallet.cdp_credentials_saved", "wallet.cdp_connected"} <= {e.type for e in events}
    assert all(_secret_free(str(e.data), running.credentials) for e in events)
    assert _secret_free(result.stdout + result.stderr, running.credentials)


def test_secrets_come_from_named_variables_and_the_spec_form_reuses_the_saved_ones(
    module_sqlite_db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    db = module_sqlite_db
    credentials = running.credentials
    variables = {
        "MY_KEY_ID": credentials.api_key_id,
        "MY_KEY": credentials.api_key_secret,
        "MY_WALLET": credentials.wallet_secret,
    }

    first = run_cli(
        db.url,
        "admin", "wallet", "connect-cdp", "--agent", agent.agent_id,
        "--api-key-id-env", "MY_KEY_ID", "--api-key-secret-env", "MY_KEY", "--wallet-secret-env", "MY_WALLET",
        "--json",
        env={"PAYWARDEN_CDP_API_URL": url, **variables},
    ).json()  # fmt: skip
    second_agent = make_agent(
        db,
        settings_for(database_url=db.url, port=1),
        allow_hosts=["api.example.com"],
        org_id=agent.org_id,
        name="second",
    )
    spec_form = (
        "admin",
        "wallet",
        "cdp",
        "second",
        "--account-name",
        "my-second-account",
        "--saved-credentials",
    )
    second = run_cli(db.url, *spec_form, "--json", env={"PAYWARDEN_CDP_API_URL": url}).json()

    assert first["accountName"] == account_name_for(agent.org_id, agent.agent_id)
    assert (second["agentId"], second["accountName"], second["mode"]) == (
        second_agent.agent_id,
        "my-second-account",
        "cdp",
    )
    assert running.account_named("my-second-account") is not None
    assert second["cdpPolicyId"] != first["cdpPolicyId"]  # one policy per wallet


def test_connecting_the_same_agent_again_keeps_its_account_and_updates_its_policy_in_place(
    module_sqlite_db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    first = connected(module_sqlite_db, api_url=url, agent=agent.agent_id, credentials=running.credentials)
    policies = len(running.policies)

    again = connected(module_sqlite_db, api_url=url, agent=agent.agent_id, credentials=None)

    assert (again["address"], again["cdpPolicyId"]) == (first["address"], first["cdpPolicyId"])
    assert len(running.policies) == policies
    with module_sqlite_db.read() as session:
        wallets = session.exec(select(Wallet).where(Wallet.agent_id == agent.agent_id)).all()
    assert sorted(w.retired_at is None for w in wallets) == [False, True]


@pytest.mark.parametrize(
    ("args", "stdin", "env", "expected"),
    [
        pytest.param(
            ("--api-key-secret", "s3cret"), None, {}, "No such option", id="a-secret-as-an-argument"
        ),
        pytest.param(
            ("--api-key-id-env", "ONLY_ONE"), None, {"ONLY_ONE": "x"}, "give all three", id="one-variable"
        ),
        pytest.param((), "just-one-line\n", {}, "give the CDP API key id", id="too-few-lines"),
        pytest.param((), "id\nnot-a-key\nnot-a-secret\n", {}, "invalid_cdp_credentials", id="not-keys"),
        pytest.param(
            ("--account-name", "no_underscores"), "STDIN", {}, "invalid_account_name", id="a-bad-name"
        ),
    ],
)
def test_refusals_write_nothing_and_ask_cdp_nothing(
    module_sqlite_db: Database,
    standin: tuple[CdpStandIn, str],
    agent: AgentSetup,
    args: tuple[str, ...],
    stdin: str | None,
    env: dict[str, str],
    expected: str,
) -> None:
    running, url = standin
    asked = len(running.requests)

    result = run_cli(
        module_sqlite_db.url,
        "admin", "wallet", "connect-cdp", "--agent", agent.agent_id, *args,
        env={"PAYWARDEN_CDP_API_URL": url, **env},
        input=secrets_text(running.credentials) if stdin == "STDIN" else stdin,
    )  # fmt: skip

    assert result.exit_code != 0
    assert expected in result.stderr + result.stdout
    assert len(running.requests) == asked
    with module_sqlite_db.read() as session:
        assert session.exec(select(Wallet).where(Wallet.agent_id == agent.agent_id)).all() == []
        org = session.get(Organization, agent.org_id)
    assert org is not None
    assert org.cdp_credentials_sealed is None


def test_credentials_cdp_refuses_are_not_saved_and_saved_ones_are_needed_to_reuse_them(
    module_sqlite_db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    _, url = standin
    unknown = new_credentials()

    refused = connect_cdp(module_sqlite_db, api_url=url, agent=agent.agent_id, credentials=unknown)
    none_saved = connect_cdp(module_sqlite_db, api_url=url, agent=agent.agent_id, credentials=None)

    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: cdp_refused:")
    assert _secret_free(refused.stdout + refused.stderr, unknown)
    assert none_saved.exit_code == 1
    assert "cdp_not_connected" in none_saved.stderr
    with module_sqlite_db.read() as session:
        org = session.get(Organization, agent.org_id)
        assert session.exec(select(Wallet).where(Wallet.agent_id == agent.agent_id)).all() == []
    assert org is not None
    assert org.cdp_credentials_sealed is None


def test_an_ec_api_key_in_pem_reads_across_lines_of_stdin(
    module_sqlite_db: Database, agent: AgentSetup
) -> None:
    credentials = new_credentials(ec_api_key=True)
    with running_standin(credentials) as (running, url):
        document = connected(module_sqlite_db, api_url=url, agent=agent.agent_id, credentials=credentials)

    assert running.account_named(document["accountName"]) is not None


def test_check_names_each_difference_and_sync_mends_it(
    module_sqlite_db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    db = module_sqlite_db
    pin_payee(db, url=SELLER, pay_to=PAYEE)  # the catalog pins the seller's payee
    document = connected(db, api_url=url, agent=agent.agent_id, credentials=running.credentials)
    env = {"PAYWARDEN_CDP_API_URL": url}

    def check() -> tuple[int, dict[str, object]]:
        result = run_cli(
            db.url, "admin", "wallet", "cdp-policy", "check", "--agent", agent.agent_id, "--json", env=env
        )
        return result.exit_code, json.loads(result.stdout)

    code, in_step = check()
    assert (code, in_step["inStep"], in_step["differences"]) == (0, True, [])

    def loosen(policy: StoredPolicy) -> None:
        # Someone with the organisation's CDP key lets the account sign ten times more, and pauses it.
        policy.rules[0]["criteria"][1]["conditions"][0]["value"] = "10000000"
        policy.status = "paused"

    running.tamper(document["cdpPolicyId"], loosen)
    code, drifted = check()
    assert code == 1
    differences = drifted["differences"]
    assert isinstance(differences, list)
    assert "The policy is paused at CDP, so CDP does not apply it." in differences
    assert any(d.startswith("Rule 1: at CDP it signs") and "of at most 10.00 USDC" in d for d in differences)

    synced = run_cli(
        db.url, "admin", "wallet", "cdp-policy", "sync", "--agent", agent.agent_id, "--json", env=env
    )
    running.tamper(document["cdpPolicyId"], lambda policy: setattr(policy, "status", "active"))

    assert synced.json()["lastError"] is None
    assert check()[0] == 0


def test_the_installed_command_connects_from_standard_input(
    tmp_path: Path, module_sqlite_db: Database
) -> None:
    setup = make_agent(
        module_sqlite_db, settings_for(database_url=module_sqlite_db.url, port=1), allow_hosts=[]
    )
    credentials = new_credentials()
    with running_standin(credentials) as (running, url):
        environ = {"PAYWARDEN_CDP_API_URL": url, "PATH": os.environ.get("PATH", "")}
        done = subprocess.run(
            [PAYWARDEN, "admin", "wallet", "connect-cdp", "--agent", setup.agent_id, "--json"],
            input=secrets_text(credentials),
            cwd=tmp_path,
            env=command_environ(database_url=module_sqlite_db.url, env=environ, master_key=TEST_MASTER_KEY),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    assert done.returncode == 0, done.stderr
    assert running.account_named(account_name_for(setup.org_id, setup.agent_id)) is not None
    assert _secret_free(done.stdout + done.stderr, credentials)


@pytest.mark.parametrize("named", [(), ("AGENT", "--agent", "AGENT")], ids=["not-named", "named-twice"])
def test_the_agent_is_named_once(
    module_sqlite_db: Database, agent: AgentSetup, named: tuple[str, ...]
) -> None:
    args = tuple(agent.agent_id if part == "AGENT" else part for part in named)

    result = run_cli(module_sqlite_db.url, "admin", "wallet", "connect-cdp", *args, "--saved-credentials")

    assert result.exit_code == 1
    assert "name the agent once" in result.stderr


def test_an_account_another_agent_of_the_organisation_pays_from_is_refused(
    module_sqlite_db: Database, standin: tuple[CdpStandIn, str], agent: AgentSetup
) -> None:
    running, url = standin
    first = connected(module_sqlite_db, api_url=url, agent=agent.agent_id, credentials=running.credentials)
    other = make_agent(
        module_sqlite_db,
        settings_for(database_url=module_sqlite_db.url, port=1),
        allow_hosts=[],
        org_id=agent.org_id,
        name="other",
    )

    refused = connect_cdp(
        module_sqlite_db,
        api_url=url,
        agent=other.agent_id,
        credentials=None,
        args=("--account-name", str(first["accountName"])),
    )

    assert refused.exit_code == 1
    assert "cdp_account_in_use" in refused.stderr
    with module_sqlite_db.read() as session:
        assert session.exec(select(Wallet).where(Wallet.agent_id == other.agent_id)).all() == []
