"""The in-memory cluster answers as the apiserver does for the calls the agent makes: merge patches with
resourceVersion preconditions, the Eviction API's 201/404/409/429/500 against PodDisruptionBudgets, graceful
deletion on simulated time, the scheduler, node removal and the benchmark's counters."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from agent.drain.cordon import decide_cordon, decide_uncordon
from agent.drain.engine import DrainEngine
from agent.kube.eviction import EvictionStatus
from agent.membership_records import membership_records
from core.exceptions import KubernetesApiError
from core.model import Command, CommandKind
from core.settings import AgentSettings
from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_model import Room
from sim.kube_objects import Budget

NS = "default"


def cluster(nodes: int = 2, **kwargs: int) -> tuple[Kernel, SimKube]:
    kernel = Kernel(seed=1)
    kube = SimKube(kernel, Faults(kernel), **kwargs)
    for i in range(nodes):
        kube.add_node(f"n{i}", f"i-{i:017x}", "us-east-1a")
    return kernel, kube


def web(kube: SimKube, kernel: Kernel, replicas: int = 3, grace: int = 20) -> None:
    kube.add_deployment(NS, "web", replicas, grace=grace)
    kernel.run(kernel.t + 30)  # scheduled and Ready


def test_pending_pods_are_bound_to_the_least_loaded_schedulable_node_and_become_ready() -> None:
    kernel, kube = cluster(2)
    kube.add_deployment(NS, "web", 4)
    assert len(kube.pending) == 4
    kernel.run(1.0)
    assert not kube.pending
    assert [len(kube.by_node[n]) for n in ("n0", "n1")] == [2, 2]
    pods, _ = kube.list_pods_on_node("n0")
    assert all(p.phase == "Running" and not p.ready for p in pods)
    kernel.run(20.0)
    pods, _ = kube.list_pods_on_node("n0")
    assert all(p.ready for p in pods)
    assert pods[0].controller is not None and pods[0].controller.kind == "ReplicaSet"


@pytest.mark.parametrize("grace", [0, 20])
def test_a_scale_down_that_meets_unbound_pods_leaves_as_many_active_pods_as_replicas(grace: int) -> None:
    kernel, kube = cluster(1)
    kube.patch_node("n0", {"spec": {"unschedulable": True}})
    web(kube, kernel, replicas=5, grace=grace)  # nowhere to go: all five pending, unbound
    kube.scale(NS, "web", 1)  # each removal at once reconciles again (once raised KeyError)
    assert len(kube.deployments[f"{NS}/web"].active) == 1 and len(kube.pending) == 1
    kube.patch_node("n0", {"spec": {"unschedulable": False}})
    kernel.run(kernel.t + 30)
    pods, _ = kube.list_pods_on_node("n0")
    assert [p.ready for p in pods] == [True]
    kube.scale(NS, "web", 0)  # a bound pod: terminating for its grace, then gone
    kernel.run(kernel.t + grace + 1)
    assert kube.list_pods_on_node("n0")[0] == [] and not kube.deployments[f"{NS}/web"].active


def test_a_cordon_patch_with_a_stale_resource_version_loses_and_a_fresh_one_wins() -> None:
    kernel, kube = cluster(2)
    node = kube.get_node("n0")
    assert node is not None and node.instance_id == "i-00000000000000000"
    kube.patch_node("n0", {"metadata": {"annotations": {"x": "y"}}})  # someone else writes first
    stale = decide_cordon(node, "cmd-1").patch
    assert stale is not None and kube.patch_node("n0", stale) is None
    fresh_node = kube.get_node("n0")
    assert fresh_node is not None
    fresh = decide_cordon(fresh_node, "cmd-1").patch
    assert fresh is not None
    cordoned = kube.patch_node("n0", fresh)
    assert cordoned is not None and cordoned.unschedulable and cordoned.cordoned_by == "cmd-1"
    assert cordoned.annotations["x"] == "y"  # a merge, not a replace
    kube.add_deployment(NS, "web", 3)
    kernel.run(2.0)
    assert len(kube.by_node["n0"]) == 0 and len(kube.by_node["n1"]) == 3  # the scheduler avoids the cordon
    undo = decide_uncordon(cordoned).patch
    assert undo is not None
    back = kube.patch_node("n0", undo)
    assert back is not None and not back.unschedulable and back.cordoned_by is None


def test_a_budget_refuses_the_eviction_that_would_break_it_until_the_replacement_is_ready() -> None:
    kernel, kube = cluster(2)
    kube.add_budget(Budget(NS, "web-pdb", {"app": "web"}, min_available=2))
    web(kube, kernel)
    assert kube.budget_status(NS, "web-pdb") == (1, 2, 3)
    first, second = [key.split("/")[1] for key in kube.deployments[f"{NS}/web"].pods][:2]
    ok = kube.evict_pod(NS, first)
    assert ok.status is EvictionStatus.EVICTED and ok.http_status == 201
    refused = kube.evict_pod(NS, second)
    assert refused.status is EvictionStatus.BLOCKED and refused.http_status == 429
    assert refused.pdb_blocked and refused.pdb_name == "web-pdb"
    assert kube.counters.evictions_refused == 1
    kernel.run(kernel.t + 15)  # the replacement (created at the eviction) is bound and Ready
    assert kube.evict_pod(NS, second).status is EvictionStatus.EVICTED
    assert kube.counters.stopped_by_eviction == 2


def test_max_unavailable_and_percentages_count_against_the_deployments_scale() -> None:
    kernel, kube = cluster(2)
    kube.add_budget(Budget(NS, "web-pdb", {"app": "web"}, max_unavailable="25%"))
    web(kube, kernel, replicas=8)
    assert kube.budget_status(NS, "web-pdb") == (2, 6, 8)


def test_pending_terminating_and_unknown_pods_and_several_budgets() -> None:
    _, kube = cluster(0)
    kube.add_budget(Budget(NS, "all", {}, min_available=5))
    kube.add_deployment(NS, "web", 1)  # no node: stays Pending
    pending = next(iter(kube.pending)).split("/")[1]
    assert kube.evict_pod(NS, pending).status is EvictionStatus.EVICTED  # a Pending pod ignores budgets
    assert kube.evict_pod(NS, "nope").status is EvictionStatus.GONE
    kube.add_node("n0", "i-0", "us-east-1a")
    uid = kube.add_pod(NS, "bare", node="n0", labels={"app": "bare"})
    assert kube.evict_pod(NS, "bare", uid="other").status is EvictionStatus.BLOCKED  # the budget is checked first
    blocked = kube.evict_pod(NS, "bare", uid=uid)
    assert blocked.status is EvictionStatus.BLOCKED and blocked.pdb_name == "all"
    kube.add_budget(Budget(NS, "bare", {"app": "bare"}, min_available=0))
    assert kube.evict_pod(NS, "bare").status is EvictionStatus.MULTIPLE_PDBS
    assert kube.delete_pod(NS, "bare", uid=uid)  # DELETE consults no budget
    info = kube.pod(NS, "bare")
    assert info is not None and info.terminating
    assert kube.evict_pod(NS, "bare", uid="other").status is EvictionStatus.GONE  # 409: the uid precondition
    assert kube.evict_pod(NS, "bare").status is EvictionStatus.EVICTED  # terminating: no budget consulted


def test_graceful_deletion_keeps_the_pod_terminating_for_its_grace_and_a_shorter_grace_shortens_it() -> None:
    kernel, kube = cluster(1)
    kube.add_pod(NS, "slow", node="n0", owner=("ReplicaSet", "x"), grace=100)
    _, rv = kube.list_pods_on_node("n0")
    assert kube.evict_pod(NS, "slow").status is EvictionStatus.EVICTED
    pods, _ = kube.list_pods_on_node("n0")
    assert pods[0].deletion_timestamp == kernel.now().replace(microsecond=0) + timedelta(seconds=100)
    kernel.run(50)
    assert kube.pod(NS, "slow") is not None
    assert kube.delete_pod(NS, "slow", grace_period_seconds=5)
    kernel.run(54)
    assert kube.pod(NS, "slow") is not None
    kernel.run(56)
    assert kube.pod(NS, "slow") is None
    events = [e.type for e in kube.watch_pods_on_node("n0", rv, 60)]
    assert events == ["MODIFIED", "MODIFIED", "DELETED"]


def test_a_watch_from_a_resource_version_no_longer_kept_answers_410() -> None:
    kernel, kube = cluster(1, event_log=3)
    _, rv = kube.list_pods_on_node("n0")
    kube.add_deployment(NS, "web", 3)
    kernel.run(30)
    assert [(e.type, e.code) for e in kube.watch_pods_on_node("n0", rv, 60)] == [("ERROR", 410)]


def test_a_node_that_goes_away_kills_its_running_pods_and_they_wait_unschedulable_for_room() -> None:
    kernel, kube = cluster(2, max_pods_per_node=2)
    kube.add_daemonset("kube-system", "cni")
    web(kube, kernel, replicas=2)
    assert len(kube.by_node["n0"]) == 2  # the DaemonSet pod and one web pod each
    kube.evict_pod(NS, next(iter(kube.by_node["n1"].keys() - {"kube-system/cni-n1"})).split("/")[1])
    kube.remove_instance("i-00000000000000001")  # n1, with its evicted pod still terminating
    kube.remove_node("n0")
    assert kube.counters.killed_by_reclaim == 1 and kube.counters.cut_short == 1
    assert kube.counters.stopped_by_eviction == 1
    assert len(kube.pending) == 2  # recreated, nowhere to go
    before = kube.unschedulable_pod_seconds  # 2 pods x 1 s before their first scheduling pass
    kernel.run(kernel.t + 100)
    assert before == 2 and kube.unschedulable_pod_seconds == 202
    kube.add_node("n2", "i-2", "us-east-1b")
    kernel.run(kernel.t + 2)
    assert len(kube.pending) == 1 and len(kube.by_node["n2"]) == 2  # cni-n2 and one web pod (room for 2)


def test_the_real_engine_cordons_through_the_sim_and_membership_reads_its_pages() -> None:
    kernel, kube = cluster(3)
    settings = AgentSettings(cluster_name="demo", table_name="t", queue_url="q")
    engine = DrainEngine(kube, settings, clock=kernel)
    with kernel.installed():
        command = Command(
            command_id="c1",
            cluster="demo",
            kind=CommandKind.DRAIN,
            instance_id="i-00000000000000001",
            reason="test",
            deadline=kernel.now() + timedelta(seconds=120),
        )
        node, decision = engine.cordon(command)
    assert node.name == "n1" and node.unschedulable and decision.ours
    pages = list(kube.list_node_pages(page_size=2))
    assert [len(page) for page, _ in pages] == [2, 1]
    records = membership_records([n for page, _ in pages for n in page], {}, kernel.now())
    assert sorted(r.instance_id for r in records) == sorted(kube.instances)


def test_injected_faults_answer_as_the_adapter_raises_and_evictions_as_retryable_errors() -> None:
    kernel, kube = cluster(1)
    assert kube.faults is not None
    kube.faults.add(FaultWindow("kube", "", 0, 10, "InternalError"))
    kube.add_pod(NS, "p", node="n0")
    response = kube.evict_pod(NS, "p")
    assert response.status is EvictionStatus.ERROR and response.retryable
    with pytest.raises(KubernetesApiError):
        kube.get_node("n0")
    kernel.run(11)
    assert kube.get_node("n0") is not None


def test_a_node_name_reused_by_a_new_instance_replaces_the_old_node() -> None:
    kernel, kube = cluster(1)
    web(kube, kernel, replicas=2)
    kube.add_node("n0", "i-0000000000000beef", "us-east-1b")
    assert kube.instances == {"i-0000000000000beef": "n0"} and kube.counters.killed_by_reclaim == 2
    node = kube.get_node("n0")
    assert node is not None and node.instance_id == "i-0000000000000beef"
    kernel.run(kernel.t + 2)
    assert len(kube.by_node["n0"]) == 2  # the replacements, on the new node


def test_a_deployment_made_again_with_other_labels_has_its_new_pods_counted_by_the_budgets_selecting_them() -> None:
    kernel, kube = cluster(2)
    kube.add_budget(Budget(NS, "front", {"tier": "front"}, min_available=1))
    kube.add_deployment(NS, "web", 1)  # labelled app=web only: not the budget's
    kernel.run(kernel.t + 30)
    assert kube.budget_status(NS, "front") == (0, 1, 0)
    kube.add_deployment(NS, "web", 3, labels={"tier": "front"})  # made again: its new pods carry tier=front
    kernel.run(kernel.t + 30)
    front = [
        info
        for info in kube.pods.values()
        if (info.obj["metadata"].get("labels") or {}).get("tier") == "front" and info.healthy
    ]
    assert len(front) >= 2
    assert kube.budget_status(NS, "front") == (len(front) - 1, 1, len(front))


@pytest.mark.parametrize("seed", range(6))
def test_the_scheduler_binds_where_a_look_at_every_node_would(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Room`` keeps the scheduler's choices as nodes join, leave, are cordoned, go NotReady and fill up: each node
    it picks is the one a look at every schedulable node picks (fewest pods below the room, then the least name)."""
    rng = random.Random(seed)
    kernel, kube = cluster(4, max_pods_per_node=4)
    kube.add_daemonset("kube-system", "cni")
    picks: list[str] = []
    take = Room.take

    def checked(room: Room) -> str | None:
        free = [(len(kube.by_node[n]), n) for n in kube.schedulable if len(kube.by_node[n]) < 4]
        node = take(room)
        assert node == (min(free)[1] if free else None)
        picks.append(str(node))
        return node

    monkeypatch.setattr(Room, "take", checked)
    kube.add_deployment(NS, "web", 6, grace=5)
    kube.add_deployment(NS, "api", 4, grace=2)
    nodes = 4
    for _ in range(150):
        live = sorted(kube.nodes)
        action = rng.randrange(7)
        if action == 0 or not live:
            kube.add_node(f"n{nodes}", f"i-{nodes:017x}", "us-east-1a")
            nodes += 1
        elif action == 1:
            kube.remove_node(rng.choice(live))
        elif action == 2:
            kube.patch_node(rng.choice(live), {"spec": {"unschedulable": rng.random() < 0.5}})
        elif action == 3:
            kube.set_node_ready(rng.choice(live), rng.random() < 0.7)
        elif action == 4:
            name = rng.choice(["web", "api"])
            kube.scale(NS, name, max(0, kube.deployments[f"{NS}/{name}"].replicas + rng.randrange(-3, 4)))
        elif action == 5 and kube.pods:
            pod = rng.choice(sorted(kube.pods))
            if pod.startswith(NS):
                kube.delete_pod(NS, pod.split("/")[1])
        kernel.run(kernel.t + rng.choice([0.5, 3, 30]))
    assert len(picks) > 50 and "None" in picks  # nodes picked, and passes that found no room


def _budgets_world(seed: int, every: bool, monkeypatch: pytest.MonkeyPatch) -> SimKube:
    """Budgets, Deployments, bare pods and a DaemonSet made in a random order over two namespaces; with ``every``
    each pod is judged against every budget and each new budget against every group (the index bypassed)."""
    rng = random.Random(seed)
    kernel, kube = cluster(3)
    if every:
        monkeypatch.setattr(kube._index, "budgets_for", lambda namespace, labels: list(kube.budgets))
        monkeypatch.setattr(kube._index, "groups_for", lambda key: list(kube._alike))
    selectors = [{}, {"app": "x"}, {"app": "y", "tier": "web"}, {"tier": "db"}, {"tier": "web", "zone": "1"}]
    for i in range(60):
        ns = rng.choice(["a", "b"])
        labels = {k: rng.choice(v) for k, v in (("tier", ["web", "db"]), ("zone", ["1", "2"])) if rng.random() < 0.7}
        step = rng.randrange(5)
        if step == 0:  # a budget, sometimes made again under its name with another selector
            name = f"pdb-{rng.randrange(8)}"
            kube.add_budget(Budget(ns, name, rng.choice(selectors), max_unavailable=1))
        elif step == 1:
            kube.add_deployment(ns, rng.choice(["x", "y", f"d{i}"]), rng.randrange(1, 4), labels=labels)
        elif step == 2:
            kube.add_pod(ns, f"bare-{i}", labels={"app": rng.choice(["x", "y"]), **labels}, node="n0")
        elif step == 3:
            kube.add_daemonset(ns, f"ds-{i}")
        kernel.run(kernel.t + 5)
    return kube


@pytest.mark.parametrize("seed", range(5))
def test_budgets_found_through_the_index_are_those_a_look_at_every_budget_finds(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    indexed, every = _budgets_world(seed, False, monkeypatch), _budgets_world(seed, True, monkeypatch)
    assert indexed.pods.keys() == every.pods.keys() and indexed.budgets == every.budgets
    assert {key: info.budgets for key, info in indexed.pods.items()} == {
        key: info.budgets for key, info in every.pods.items()
    }
    assert indexed.budget_counts == every.budget_counts
    assert sum(len(info.budgets) for info in indexed.pods.values()) > 10  # budgets selected pods
