"""The disruption controller's pure part: PDB status arithmetic, as the real controller computes it."""

from __future__ import annotations

from typing import Any

from localworld.simulator.disruption import pdb_status, scaled_value

NS = "ns"


def pod(
    name: str, app: str, *, ready: bool = True, owner: str | None = "rs-uid", terminating: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}", "labels": {"app": app}}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": "rs", "uid": owner, "controller": True}]
    if terminating:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    return {"metadata": meta, "spec": {"nodeName": "n1"}, "status": status}


def pdb(spec: dict[str, Any], status: dict[str, Any] | None = None, generation: int = 3) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": NS, "generation": generation},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
        "status": status or {},
    }


def status_of(budget: dict[str, Any], pods: list[dict[str, Any]], replicas: int = 4) -> dict[str, Any]:
    rsets = {"ns/rs": {"metadata": {"name": "rs", "namespace": NS, "uid": "rs-uid"}, "spec": {"replicas": replicas}}}
    by_key = {f"{NS}/{p['metadata']['name']}": p for p in pods}
    return pdb_status(budget, by_key, rsets, {}, {}, now=1e10)


def test_min_available_counts_ready_pods_that_are_not_terminating() -> None:
    pods = [
        pod("a", "web"),
        pod("b", "web"),
        pod("c", "web", ready=False),
        pod("d", "web", terminating=True),
        pod("x", "db"),
    ]
    s = status_of(pdb({"minAvailable": 1}), pods)
    assert (s["currentHealthy"], s["desiredHealthy"], s["disruptionsAllowed"], s["expectedPods"]) == (2, 1, 1, 4)
    assert s["observedGeneration"] == 3


def test_max_unavailable_is_relative_to_the_controllers_replicas() -> None:
    pods = [pod(n, "web") for n in "abc"]
    s = status_of(pdb({"maxUnavailable": 1}), pods, replicas=4)
    assert (s["expectedPods"], s["desiredHealthy"], s["disruptionsAllowed"]) == (4, 3, 0)
    s = status_of(pdb({"maxUnavailable": "50%"}), pods, replicas=4)
    assert (s["desiredHealthy"], s["disruptionsAllowed"]) == (2, 1)


def test_percent_min_available_rounds_up() -> None:
    pods = [pod(n, "web") for n in "abc"]
    s = status_of(pdb({"minAvailable": "50%"}), pods, replicas=3)
    assert (s["desiredHealthy"], s["disruptionsAllowed"]) == (2, 1)


def test_pods_without_controller_fail_safe_for_max_unavailable() -> None:
    s = status_of(pdb({"maxUnavailable": 1}), [pod("a", "web", owner=None), pod("b", "web", owner=None)])
    assert s["disruptionsAllowed"] == 0


def test_disrupted_pods_are_not_healthy_until_gone_and_entries_of_gone_pods_are_dropped() -> None:
    pods = [pod("a", "web"), pod("b", "web"), pod("c", "web", terminating=True)]
    budget = pdb(
        {"minAvailable": 1},
        {"disruptedPods": {"a": "2999-01-01T00:00:00Z", "c": "2999-01-01T00:00:00Z", "z": "2999-01-01T00:00:00Z"}},
    )
    s = status_of(budget, pods)
    assert s["disruptedPods"] == {"a": "2999-01-01T00:00:00Z"}
    assert (s["currentHealthy"], s["disruptionsAllowed"]) == (1, 0)


def test_empty_selector_selects_nothing_in_policy_v1beta1() -> None:
    budget = pdb({"minAvailable": 1})
    budget["spec"]["selector"] = {}
    s = status_of(budget, [pod("a", "web")])
    assert s["currentHealthy"] == 0 and s["disruptionsAllowed"] == 0


def test_scaled_value_rounds_percentages_as_asked() -> None:
    assert scaled_value("25%", 10, round_up=True) == 3 and scaled_value("25%", 10, round_up=False) == 2
    assert scaled_value(3, 10, round_up=True) == 3 and scaled_value("4", 10, round_up=False) == 4
