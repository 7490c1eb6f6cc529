"""The grace period a process takes to stop fits inside the one its platform gives it: Kubernetes
kills a pod `terminationGracePeriodSeconds` after SIGTERM, compose a container after its
`stop_grace_period`; either would cut a payment the process was still finishing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from server.kit.stopping import calls_grace_seconds, reserve_seconds
from server.settings import Settings

INFRA = Path(__file__).resolve().parents[2] / "infra"


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def of_kind(kind: str) -> dict[str, Any]:
    (found,) = [d for d in documents(INFRA / "k8s" / "deployment.yaml") if d["kind"] == kind]
    return found


def test_the_pods_grace_in_kubernetes_is_longer_than_the_process_takes_to_stop() -> None:
    (config,) = documents(INFRA / "k8s" / "config.yaml")
    grace = int(config["data"]["PAYWARDEN_SHUTDOWN_GRACE_SECONDS"])
    pod = of_kind("Deployment")["spec"]["template"]["spec"]
    assert grace < pod["terminationGracePeriodSeconds"] <= 30
    assert Settings.model_fields["shutdown_grace_seconds"].default < pod["terminationGracePeriodSeconds"]


def test_compose_waits_for_the_replicas_grace_period() -> None:
    (compose,) = documents(INFRA / "compose.yaml")
    template = compose["x-paywarden"]
    grace = int(template["environment"]["PAYWARDEN_SHUTDOWN_GRACE_SECONDS"])
    assert template["stop_grace_period"].endswith("s")
    assert grace < int(template["stop_grace_period"].removesuffix("s"))
    for name in ("paywarden-1", "paywarden-2"):
        assert compose["services"][name]["stop_grace_period"] == template["stop_grace_period"]


def test_calls_in_flight_get_the_grace_period_but_what_the_process_keeps_to_stop() -> None:
    assert calls_grace_seconds(25) == 20
    assert calls_grace_seconds(6) == 5
    assert calls_grace_seconds(2) == 1
    assert calls_grace_seconds(3600) == 3595
    assert all(calls_grace_seconds(g) + reserve_seconds(g) == g for g in range(2, 100))
