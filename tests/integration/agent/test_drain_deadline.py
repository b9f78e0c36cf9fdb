"""Drains against their deadline, on the local world (``test_drain.py`` has the drain engine's other cases): a
PodDisruptionBudget that allows no disruption times the drain out with its pods left, a pod under two budgets is
reported until the deadline; and shutdown time inside the deadline (issue 9.2): a pod's grace capped so it stops
before a Spot deadline, PodDisruptionBudget-protected pods deleted with their grace before it (or left until it under
the honor policy), and a pod bound to the node after its cordon evicted with the others.
"""

from __future__ import annotations

import threading
import time

from agent.drain.engine import DrainEngine
from agent.drain.policy import GraceSource, PodAction
from agent.drain.results import NodeCommandResult
from agent.kube.client import KubeAdapter
from agent.kube.views import CORDON_ANNOTATION
from core.model import CommandKind, CommandStatus
from core.settings import PdbDeadlinePolicy
from localworld.cluster import ClusterInfo
from localworld.rest import KubeRest
from localworld.simulator.objects import is_live, pod_ready
from localworld.workloads import (
    block_with_pdb,
    create_bare_pod,
    create_pdb,
    deploy_pods_on_node,
    get_pdb,
    list_pdbs,
)
from localworld.world import LocalWorld
from tests.integration.agent.drain_helpers import (
    Backoff,
    command,
    instance_of,
    node_events,
    node_json,
    non_daemonset_pods,
    outcome,
    workers,
)


def test_pdb_allowing_no_disruption_times_out_with_the_pods_left(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    target = workers(world)[0]["metadata"]["name"]
    app = deploy_pods_on_node(world.rest, target, 3, grace=0, namespace="held", name="held")
    pdb = block_with_pdb(world.rest, "held", app)
    world.simulator.wait_for(
        lambda: (
            get_pdb(world.rest, "held", pdb).get("status", {}).get("observedGeneration") == 1
            and get_pdb(world.rest, "held", pdb)["status"]["currentHealthy"] == 3
        ),
        10,
        "PDB status current",
    )
    instance = instance_of(node_json(world, target))

    started = time.monotonic()
    result = engine.run(command(CommandKind.DRAIN, instance, 3))
    elapsed = time.monotonic() - started

    assert result.status == CommandStatus.TIMED_OUT
    assert sorted(r.name for r in result.remaining) == sorted(
        p["metadata"]["name"] for p in non_daemonset_pods(world, target)
    )
    assert len(result.remaining) == 3
    assert {r.why for r in result.remaining} == {f"blocked by PodDisruptionBudget {pdb}"}
    assert all(p.attempts >= 3 for p in result.pods if p.name.startswith("held"))  # retried with backoff
    assert elapsed < 3 + 2, f"the drain overran its deadline: {elapsed:.1f} s"
    # the node stays cordoned, as ours, and all 3 pods are still there and Ready
    node = node_json(world, target)
    assert node["spec"]["unschedulable"] is True and CORDON_ANNOTATION in node["metadata"]["annotations"]
    assert len([p for p in non_daemonset_pods(world, target) if pod_ready(p) and is_live(p)]) == 3
    assert [e["reason"] for e in node_events(world, target)] == ["NodeDrainTimedOut"]
    assert node_events(world, target)[0]["type"] == "Warning"


def test_pod_under_two_pdbs_is_reported_until_the_deadline(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    target = workers(world)[2]["metadata"]["name"]
    app = deploy_pods_on_node(world.rest, target, 1, namespace="twice", name="twice")
    create_pdb(world.rest, "twice", "first", {"app": app}, max_unavailable=1)
    create_pdb(world.rest, "twice", "second", {"app": app}, max_unavailable=1)
    world.simulator.wait_for(
        lambda: all(p.get("status", {}).get("currentHealthy") == 1 for p in list_pdbs(world.rest, "twice")),
        10,
        "PDB status current",
    )

    result = engine.run(command(CommandKind.DRAIN, instance_of(node_json(world, target)), 1.5))

    assert result.status == CommandStatus.TIMED_OUT
    (left,) = result.remaining
    assert left.name.startswith("twice") and left.why.startswith("selected by more than one PodDisruptionBudget")
    (pod,) = [p for p in result.pods if p.name == left.name]
    assert pod.attempts >= 2 and not pod.gone


SPOT = "spot-interruption:terminate"  # the reason the interruption Lambda gives a Spot warning's drain


class PodDeletions:
    """Samples a namespace's pods every 100 ms in the background and keeps, per pod uid, when it was first seen
    terminating (``time.monotonic``), the ``metadata.deletionGracePeriodSeconds`` the apiserver set, and when it
    was first seen gone."""

    def __init__(self, rest: KubeRest, namespace: str) -> None:
        self.rest = rest
        self.namespace = namespace
        self.terminating: dict[str, float] = {}
        self.grace: dict[str, int] = {}
        self.gone: dict[str, float] = {}
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> PodDeletions:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sample()  # what changed since the last tick (the drain may end right after its pod went)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self._sample()

    def _sample(self) -> None:
        now = time.monotonic()
        pods = self.rest.get(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
        present = set()
        for pod in pods:
            meta = pod["metadata"]
            uid = meta["uid"]
            present.add(uid)
            if meta.get("deletionTimestamp") and uid not in self.terminating:
                self.terminating[uid] = now
                self.grace[uid] = int(meta.get("deletionGracePeriodSeconds", -1))
        for uid in self._seen - present:
            self.gone.setdefault(uid, now)
        self._seen |= present


def grace_engine(world: LocalWorld, margin: float, policy: PdbDeadlinePolicy) -> DrainEngine:
    kube = KubeAdapter(world.agent_api)
    settings = Backoff(drain_grace_margin_seconds=margin, drain_pdb_deadline_policy=policy)
    return DrainEngine(kube, settings, events=None)


def held_pods(world: LocalWorld, target: str, namespace: str, count: int, grace: int) -> tuple[str, list[str]]:
    """``count`` pods of one app with ``grace`` on ``target`` under a PDB allowing no disruption; (app, uids)."""
    app = deploy_pods_on_node(world.rest, target, count, grace=grace, namespace=namespace, name=namespace)
    pdb = block_with_pdb(world.rest, namespace, app)
    world.simulator.wait_for(  # type: ignore[union-attr]
        lambda: get_pdb(world.rest, namespace, pdb).get("status", {}).get("currentHealthy") == count,
        10,
        "PDB status current",
    )
    return app, [p["metadata"]["uid"] for p in non_daemonset_pods(world, target)]


def test_a_grace_longer_than_the_deadline_is_capped_so_the_pod_stops_before_it(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    """A pod with a 180 s grace on a Spot drain with 60 s left: the eviction carries a capped gracePeriodSeconds
    (the Eviction's deleteOptions, policy/v1beta1 on this v1.20 apiserver), the apiserver sets it as the pod's
    deletionGracePeriodSeconds, and the pod has its shutdown and is gone before the deadline."""
    target = workers(world)[0]["metadata"]["name"]
    app = deploy_pods_on_node(world.rest, target, 1, grace=180, namespace="grace", name="slow180")
    ((uid, pod_grace),) = [
        (p["metadata"]["uid"], p["spec"]["terminationGracePeriodSeconds"]) for p in non_daemonset_pods(world, target)
    ]
    assert pod_grace == 180
    instance = instance_of(node_json(world, target))

    with PodDeletions(world.rest, "grace") as seen:
        started = time.monotonic()
        result = engine.run(command(CommandKind.DRAIN, instance, 60, reason=SPOT))
        deadline = started + 60
        ended = time.monotonic()
    print(f"\n180 s-grace pod, 60 s deadline: {result.message}; pods {[p.model_dump() for p in result.pods]}")

    assert result.status == CommandStatus.SUCCEEDED, result.model_dump_json(indent=1)
    (out,) = outcome(result, app)
    # capped to the time left minus the 10 s margin, and said so
    assert out.grace_source == GraceSource.DEADLINE and out.grace_seconds is not None
    assert 45 <= out.grace_seconds <= 50, out.grace_seconds
    # what the apiserver recorded on the pod is the capped grace, not its own 180 s
    assert seen.grace[uid] == out.grace_seconds
    # SIGTERM early in the drain, then the whole capped grace to stop (not killed), gone before the deadline
    assert seen.terminating[uid] - started < 5
    assert seen.gone[uid] - seen.terminating[uid] >= out.grace_seconds - 1
    assert seen.gone[uid] < deadline - 5, f"gone {deadline - seen.gone[uid]:.1f} s before the deadline"
    assert ended < deadline


def test_a_pdb_protected_pod_is_deleted_with_its_grace_before_a_spot_deadline(
    world: LocalWorld, cluster: ClusterInfo
) -> None:
    """DRAIN_PDB_DEADLINE_POLICY=delete: the budget is honoured (evictions refused, retried) until the pods'
    grace is about to stop fitting, then they are DELETEd with their full grace and are gone before the deadline."""
    target = workers(world)[1]["metadata"]["name"]
    app, uids = held_pods(world, target, "held-delete", 2, grace=4)
    engine = grace_engine(world, margin=3, policy=PdbDeadlinePolicy.DELETE)
    instance = instance_of(node_json(world, target))

    with PodDeletions(world.rest, "held-delete") as seen:
        started = time.monotonic()
        result = engine.run(command(CommandKind.DRAIN, instance, 16, reason=SPOT))
        deadline = started + 16

    assert result.status == CommandStatus.SUCCEEDED, result.model_dump_json(indent=1)
    held = outcome(result, app)
    assert len(held) == 2
    for out in held:
        assert out.grace_source == GraceSource.PDB_DEADLINE and out.grace_seconds == 4
        assert out.attempts >= 3 and out.gone  # refused by the budget, retried, then deleted
    for uid in uids:
        # the budget held them until deadline - margin - grace - 1 (8 s in), no longer
        assert 7 <= seen.terminating[uid] - started <= 9.5, seen.terminating[uid] - started
        assert seen.grace[uid] == 4
        assert seen.terminating[uid] + 3 <= seen.gone[uid] < deadline - 1


def test_a_pdb_protected_pod_is_left_until_the_deadline_with_the_honor_policy(
    world: LocalWorld, cluster: ClusterInfo
) -> None:
    """DRAIN_PDB_DEADLINE_POLICY=honor: the same Spot drain keeps retrying the eviction and times out with the
    pods left, never deleted."""
    target = workers(world)[1]["metadata"]["name"]
    app, uids = held_pods(world, target, "held-honor", 2, grace=4)
    engine = grace_engine(world, margin=3, policy=PdbDeadlinePolicy.HONOR)
    instance = instance_of(node_json(world, target))

    with PodDeletions(world.rest, "held-honor") as seen:
        result = engine.run(command(CommandKind.DRAIN, instance, 10, reason=SPOT))

    assert result.status == CommandStatus.TIMED_OUT
    assert sorted(r.name for r in result.remaining) == sorted(o.name for o in outcome(result, app))
    assert {r.why for r in result.remaining} == {f"blocked by PodDisruptionBudget {app}-blocker"}
    assert all(o.grace_source is None and o.attempts >= 3 for o in outcome(result, app))
    assert seen.terminating == {} and seen.gone == {}
    assert len([p for p in non_daemonset_pods(world, target) if is_live(p)]) == len(uids) == 2


def test_a_pod_bound_to_the_node_after_its_cordon_is_evicted_with_the_others(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    # a scheduler whose view of the node had not caught up with the cordon binds a pod there while the drain runs
    target = workers(world)[0]["metadata"]["name"]
    deploy_pods_on_node(world.rest, target, 1, grace=8, namespace="late", name="slow")
    instance = instance_of(node_json(world, target))
    results: list[NodeCommandResult] = []
    runner = threading.Thread(target=lambda: results.append(engine.run(command(CommandKind.DRAIN, instance, 60))))
    runner.start()

    def slow_evicted() -> bool:
        return any(
            p["metadata"].get("deletionTimestamp") for p in non_daemonset_pods(world, target)
        )  # the drain listed the node's pods and evicted them

    world.simulator.wait_for(slow_evicted, 20, "the drain's eviction")
    create_bare_pod(world.rest, "late", "late-1", grace=0, node_name=target)
    runner.join(60)
    [result] = results
    assert result.status == CommandStatus.SUCCEEDED, result.message
    late = [p for p in result.pods if p.name == "late-1"]
    assert late and late[0].action == PodAction.EVICT and "after the cordon" in late[0].reason
    assert [p["metadata"]["name"] for p in non_daemonset_pods(world, target)] == []
