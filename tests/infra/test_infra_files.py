"""Every file in infra/ is checked by the tool that knows its format: hadolint for the image,
the Compose specification's JSON schema for compose.yaml, HAProxy's own check for its
configuration, kubernetes-validate for the manifests (against a named Kubernetes version), and
uv for the lock file the image installs from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.haproxy import CONFIG, environ_for, haproxy_executable

ROOT = Path(__file__).resolve().parents[2]
INFRA = ROOT / "infra"
BIN = Path(sys.executable).parent
KUBERNETES_VERSION = "1.33.0"
MANIFESTS = sorted((INFRA / "k8s").glob("*.yaml"))


def run(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done


def test_the_image_passes_hadolint_and_runs_one_process_as_a_user() -> None:
    run(BIN / "hadolint", INFRA / "Dockerfile")
    text = (INFRA / "Dockerfile").read_text()
    assert text.count("\nFROM ") >= 1
    assert " AS build" in text  # multi-stage: uv and pip stay in the build stage
    assert "--require-hashes" in text
    assert "\nUSER 10001" in text
    assert "HEALTHCHECK" in text
    cmd = next(line for line in text.splitlines() if line.startswith("CMD "))
    assert "--workers" not in cmd


def test_compose_follows_the_compose_specification() -> None:
    run(BIN / "check-jsonschema", "--builtin-schema", "vendor.compose-spec", INFRA / "compose.yaml")
    services = yaml.safe_load((INFRA / "compose.yaml").read_text())["services"]
    assert {"postgres", "migrate", "paywarden-1", "paywarden-2", "proxy"} <= services.keys()
    assert [name for name, service in services.items() if service.get("ports")] == ["proxy"]
    for replica in ("paywarden-1", "paywarden-2"):
        assert services[replica]["read_only"] is True
    proxy = services["proxy"]["environment"]
    assert (proxy["REPLICA_1"], proxy["REPLICA_2"]) == (
        "paywarden-1:8402",
        "paywarden-2:8402",
    )


def test_the_proxy_configuration_passes_haproxys_own_check(tmp_path: Path) -> None:
    environ = environ_for(
        bind="127.0.0.1:8402", replicas=["paywarden-1:8402", "paywarden-2:8402"], socket_path=tmp_path / "s"
    )
    run(haproxy_executable(), "-c", "-f", CONFIG, env=environ)


def test_the_proxy_in_kubernetes_passes_haproxys_own_check(tmp_path: Path) -> None:
    documents = [d for d in yaml.safe_load_all((INFRA / "k8s" / "proxy.yaml").read_text()) if d]
    (config,) = [d for d in documents if d["kind"] == "ConfigMap"]
    path = tmp_path / "haproxy.cfg"
    # The cluster's resolver is not here: keep the file, resolve nothing at start (init-addr none).
    path.write_text(
        config["data"]["haproxy.cfg"].replace("parse-resolv-conf", "nameserver local 127.0.0.1:53")
    )
    run(haproxy_executable(), "-c", "-f", path)


@pytest.mark.parametrize("manifest", MANIFESTS, ids=lambda path: path.name)
def test_each_manifest_is_valid_kubernetes(manifest: Path) -> None:
    if manifest.name == "kustomization.yaml":
        listed = yaml.safe_load(manifest.read_text())["resources"]
        assert sorted(listed) == sorted(p.name for p in MANIFESTS if p.name != "kustomization.yaml")
        return
    run(BIN / "kubernetes-validate", "--strict", "-k", KUBERNETES_VERSION, manifest)


def test_the_deployment_says_what_production_needs() -> None:
    kinds = {
        document["kind"]
        for manifest in MANIFESTS
        for document in yaml.safe_load_all(manifest.read_text())
        if document and "kind" in document and manifest.name != "kustomization.yaml"
    }
    assert {
        "Deployment",
        "Service",
        "Ingress",
        "Job",
        "ConfigMap",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
    } <= kinds


def test_the_lock_file_matches_pyproject() -> None:
    run(BIN / "uv", "lock", "--check")
