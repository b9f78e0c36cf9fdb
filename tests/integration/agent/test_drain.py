"""The drain engine against the local world: a real kube-apiserver v1.20 + etcd, the cluster simulator playing
kubelet, scheduler, ReplicaSet/DaemonSet and disruption controllers, and the agent's own identity (its ClusterRole
only), so every call the engine makes is proven allowed by agent/deploy/rbac/role.yaml.
"""

from __future__ import annotations

import subprocess
import threading
import time
from datetime import timedelta

import pytest

from agent.drain.cordon import ENDING_ANNOTATION
from agent.drain.engine import DrainEngine
from agent.drain.policy import PodAction
from agent.drain.results import NodeCommandResult
from agent.events import NodeEventRecorder
from agent.kube.client import KubeAdapter, make_api_client
from agent.kube.views import CORDON_ANNOTATION
from core.exceptions import NodeNotFoundError
from core.model import CommandKind, CommandStatus, DrainOptions, utcnow
from core.settings import PdbDeadlinePolicy
from localworld.cluster import ClusterInfo
from localworld.rest import q
from localworld.simulator.objects import pod_ready
from localworld.simulator.replicaset import PREFER_NODE_ANNOTATION
from localworld.workloads import (
    Workloads,
    block_with_pdb,
    create_bare_pod,
    create_replicaset,
    deploy_pods_on_node,
    deploy_workloads,
    ensure_namespace,
    get_pdb,
    pod_template,
    pods_on_node,
    wait_pods_ready,
)
from localworld.world import LocalWorld
from tests.integration.agent.drain_helpers import (
    Backoff,
    ReadyMonitor,
    command,
    instance_of,
    node_events,
    node_json,
    non_daemonset_pods,
    outcome,
    workers,
)

# ------------------------------------------------------------------------------------------------ tests


def test_drain_of_a_worker_with_the_world_workloads(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    wl: Workloads = deploy_workloads(world.rest, "workloads")
    sim = world.simulator
    assert sim is not None
    wait_pods_ready(world.rest, wl.namespace, wl.controlled_pods + 1 + len(workers(world)))
    # Enough Ready pods does not mean the bare pod is among them yet: wait for it to be bound to a node.
    target = sim.wait_for(
        lambda: world.rest.get(f"/api/v1/namespaces/{wl.namespace}/pods/{wl.bare_pod}")["spec"].get("nodeName"),
        15,
        "the bare pod scheduled",
    )
    # Make sure the target also has every other kind of pod a drain meets:
    ns = wl.namespace
    deploy_pods_on_node(world.rest, target, 2, grace=2, namespace=ns, name="slow")  # 2 s graceful termination
    create_replicaset(
        world.rest, ns, "cache", 1, pod_template("cache", empty_dir=True), annotations={PREFER_NODE_ANNOTATION: target}
    )
    done = create_bare_pod(world.rest, ns, "finished-job", node_name=target)
    # Let the simulator (the kubelet) start it first, so its own status write cannot overwrite the Succeeded phase.
    job_path = f"/api/v1/namespaces/{ns}/pods/finished-job"
    sim.wait_for(lambda: (world.rest.get(job_path).get("status") or {}).get("phase") == "Running", 10, "job running")
    world.rest.patch(f"{job_path}/status", {"status": {"phase": "Succeeded"}})
    sim.wait_for(lambda: (world.rest.get(job_path).get("status") or {}).get("phase") == "Succeeded", 10, "job finished")
    sim.wait_for(
        lambda: (
            len([p for p in pods_on_node(world.rest, target) if p["metadata"]["name"].startswith("cache")]) == 1
            and all(pod_ready(p) for p in non_daemonset_pods(world, target) if p["metadata"]["name"] != "finished-job")
        ),
        10,
        "target pods Ready",
    )
    before = non_daemonset_pods(world, target)
    web_api_before = [p for p in before if p["metadata"]["labels"]["app"] in ("web", "api")]
    node = node_json(world, target)

    with ReadyMonitor(world.rest, ns) as monitor:
        result = engine.run(command(CommandKind.DRAIN, instance_of(node), 30))
    print(f"\ndrain of {target}: {result.message}; durations {result.durations}; samples {monitor.samples}")

    assert result.status == CommandStatus.SUCCEEDED, result.model_dump_json(indent=1)
    assert result.node_name == target and result.cordoned_by_us and not result.cordoned_by_other
    assert result.remaining == [] and result.errors == []
    # cordoned, and the cordon is marked ours
    after_node = node_json(world, target)
    assert after_node["spec"]["unschedulable"] is True
    assert after_node["metadata"]["annotations"][CORDON_ANNOTATION] == f"drain-{instance_of(node)}"
    # only the DaemonSet pod is left, and it is the same pod as before
    left = pods_on_node(world.rest, target)
    assert [p["metadata"]["labels"]["app"] for p in left] == ["node-agent"]
    assert [o.action for o in outcome(result, "node-agent")] == [PodAction.SKIP]
    assert outcome(result, "node-agent")[0].reason == "daemonset"
    # bare pod and emptyDir pod evicted, and said so
    (bare,) = outcome(result, "standalone")
    assert bare.action == PodAction.EVICT and "unmanaged: will not be recreated" in bare.reason and bare.gone
    (cache,) = outcome(result, "cache")
    assert cache.action == PodAction.EVICT and "emptydir: local data lost" in cache.reason and cache.gone
    # finished pod deleted
    (finished,) = outcome(result, "finished-job")
    assert finished.action == PodAction.DELETE and finished.reason == "finished" and finished.gone
    assert done["metadata"]["uid"] == finished.uid
    # the 2 s-grace pods were waited for: gone, evicted at least ~2 s before the drain ended
    slow = outcome(result, "slow")
    assert len(slow) == 2 and all(p.gone and p.evicted_at is not None for p in slow)
    assert all((result.finished_at - p.evicted_at).total_seconds() >= 1.9 for p in slow if p.evicted_at)
    # every pod that was there (but the DaemonSet's) was evicted or deleted and is gone
    assert {p.name for p in result.pods if p.gone} == {p["metadata"]["name"] for p in before}
    assert all(p.attempts >= 1 for p in result.pods if p.action in (PodAction.EVICT, PodAction.DELETE))
    # PodDisruptionBudgets honoured throughout: web minAvailable 4 (of 6), api maxUnavailable 1 (of 3)
    assert monitor.samples > 10
    assert monitor.minimum["web"] >= 4, monitor.minimum
    assert monitor.minimum["api"] >= 2, monitor.minimum
    for app in ("web", "api"):
        pdb = get_pdb(world.rest, ns, app)
        assert pdb["status"]["currentHealthy"] >= pdb["status"]["desiredHealthy"]
    # controlled pods were recreated elsewhere and are Ready again
    wait_pods_ready(world.rest, ns, wl.controlled_pods, selector="app in (web,api,scratch)")
    assert web_api_before, "the target held no web/api pod: the PDB part of this test proved nothing"
    # the Event on the Node
    events = node_events(world, target)
    assert [e["reason"] for e in events] == ["NodeDrainSucceeded"]
    assert events[0]["type"] == "Normal" and events[0]["involvedObject"]["kind"] == "Node"
    assert result.event_posted


def held_pod_on(world: LocalWorld, target: str, name: str) -> None:
    """One pod of Deployment ``name`` on node ``target``, under a budget that allows no disruption (status current)."""
    app = deploy_pods_on_node(world.rest, target, 1, grace=0, namespace="held", name=name)
    block_with_pdb(world.rest, "held", app)
    world.simulator.wait_for(
        lambda: get_pdb(world.rest, "held", f"{app}-blocker").get("status", {}).get("currentHealthy") == 1,
        10,
        "PDB status current",
    )


def test_timed_out_drain_uncordons_when_asked_and_the_cordon_is_ours(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    target = workers(world)[1]["metadata"]["name"]
    held_pod_on(world, target, "held1")
    options = DrainOptions(uncordon_on_failure=True)
    result = engine.run(command(CommandKind.DRAIN, instance_of(node_json(world, target)), 1.5, options=options))
    assert result.status == CommandStatus.TIMED_OUT and result.uncordoned
    node = node_json(world, target)
    assert not node["spec"].get("unschedulable") and CORDON_ANNOTATION not in node["metadata"].get("annotations", {})


def test_a_refresh_drain_a_spot_warning_tightens_keeps_its_cordon_marked_ending(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    """A refresh drain (``uncordon_on_failure``) held by a PodDisruptionBudget; a Spot warning tightens it
    (``DrainEngine.tighten``, what the heartbeat does when the interruption Lambda wrote ``deadline_tightened_to``):
    the node's cordon is marked ``instance-ending`` while the drain runs, and the drain that times out at the Spot
    deadline (the honour policy: the budget holds its pod) leaves the node cordoned."""
    engine.pdb_deadline_policy = PdbDeadlinePolicy.HONOR
    target = workers(world)[2]["metadata"]["name"]
    held_pod_on(world, target, "held2")
    refresh = command(
        CommandKind.DRAIN,
        instance_of(node_json(world, target)),
        60,
        command_id="refresh-r1-0",
        options=DrainOptions(uncordon_on_failure=True),
        reason="refresh r1 step 0",
    )
    results: list[NodeCommandResult] = []
    drain = threading.Thread(target=lambda: results.append(engine.run(refresh)), daemon=True)
    drain.start()
    world.simulator.wait_for(lambda: node_json(world, target)["spec"].get("unschedulable") is True, 10, "cordoned")
    assert ENDING_ANNOTATION not in node_json(world, target)["metadata"].get("annotations", {})
    world.simulator.wait_for(lambda: engine.tighten("refresh-r1-0", utcnow() + timedelta(seconds=2)), 10, "tightened")
    annotations = node_json(world, target)["metadata"]["annotations"]
    assert annotations[ENDING_ANNOTATION] == "refresh-r1-0" and annotations[CORDON_ANNOTATION] == "refresh-r1-0"
    drain.join(15)
    (result,) = results
    assert result.status == CommandStatus.TIMED_OUT and not result.uncordoned, result.message
    assert node_json(world, target)["spec"]["unschedulable"] is True


@pytest.mark.parametrize("naming", ["id", "dns"])
def test_node_found_by_provider_id_whatever_its_name(world: LocalWorld, engine: DrainEngine, naming: str) -> None:
    world.setup_cluster(azs=("us-east-1a",), nodes_per_az=2, node_naming=naming)
    target = workers(world)[0]
    name, instance = target["metadata"]["name"], instance_of(target)
    assert (name == instance) == (naming == "id")
    other = workers(world)[1]["metadata"]["name"]
    # no hint, a right hint, and a stale hint naming another node: always the node with the providerID
    for hint in (None, name, other, "no-such-node"):
        result = engine.run(command(CommandKind.CORDON, instance, node_name=hint, command_id=f"c-{hint}"))
        assert result.node_name == name and result.status == CommandStatus.SUCCEEDED
    assert not node_json(world, other)["spec"].get("unschedulable")


def test_node_someone_else_cordoned_is_drained_but_never_uncordoned(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    target = workers(world)[2]["metadata"]["name"]
    deploy_pods_on_node(world.rest, target, 2, namespace="bench", name="fill")
    world.rest.patch(f"/api/v1/nodes/{q(target)}", {"spec": {"unschedulable": True}})  # an operator's kubectl cordon
    instance = instance_of(node_json(world, target))

    drained = engine.run(command(CommandKind.DRAIN, instance))
    assert drained.status == CommandStatus.SUCCEEDED
    assert drained.cordoned_by_other and not drained.cordoned_by_us
    assert non_daemonset_pods(world, target) == []
    assert CORDON_ANNOTATION not in node_json(world, target)["metadata"].get("annotations", {})

    undone = engine.run(command(CommandKind.UNCORDON, instance))
    assert undone.status == CommandStatus.SUCCEEDED
    assert undone.cordoned_by_other and not undone.uncordoned and "someone else" in undone.message
    assert node_json(world, target)["spec"]["unschedulable"] is True
    assert [e["reason"] for e in node_events(world, target)] == ["NodeDrainSucceeded", "NodeUncordonSkipped"]


def test_uncordon_undoes_our_own_cordon(world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine) -> None:
    target = workers(world)[3]["metadata"]["name"]
    instance = instance_of(node_json(world, target))

    cordoned = engine.run(command(CommandKind.CORDON, instance, command_id="rebalance-1"))
    assert cordoned.status == CommandStatus.SUCCEEDED and cordoned.cordoned_by_us
    node = node_json(world, target)
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"][CORDON_ANNOTATION] == "rebalance-1"

    again = engine.run(command(CommandKind.CORDON, instance, command_id="rebalance-1"))  # redelivered
    assert again.cordoned_by_us and not again.cordoned_by_other

    undone = engine.run(command(CommandKind.UNCORDON, instance, command_id="refresh-undo-7"))
    assert undone.status == CommandStatus.SUCCEEDED and undone.uncordoned and not undone.cordoned_by_other
    node = node_json(world, target)
    assert not node["spec"].get("unschedulable")
    assert CORDON_ANNOTATION not in node["metadata"].get("annotations", {})
    assert [e["reason"] for e in node_events(world, target)] == ["NodeCordoned", "NodeCordoned", "NodeUncordoned"]


def test_unknown_instance_raises_node_not_found(world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine) -> None:
    with pytest.raises(NodeNotFoundError) as caught:
        engine.run(command(CommandKind.DRAIN, "i-0ffffffffffffffff", node_name=workers(world)[0]["metadata"]["name"]))
    assert caught.value.instance_id == "i-0ffffffffffffffff"
    assert not any(n["spec"].get("unschedulable") for n in workers(world))


def test_refused_pods_fail_the_drain_before_any_eviction(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    target = workers(world)[4]["metadata"]["name"]
    ensure_namespace(world.rest, "strict")
    deploy_pods_on_node(world.rest, target, 2, namespace="strict", name="managed")
    create_bare_pod(world.rest, "strict", "loner", node_name=target)
    world.simulator.wait_for(lambda: all(pod_ready(p) for p in non_daemonset_pods(world, target)), 10, "pods Ready")
    before = sorted(p["metadata"]["uid"] for p in non_daemonset_pods(world, target))

    strict = DrainOptions(force=False)
    result = engine.run(command(CommandKind.DRAIN, instance_of(node_json(world, target)), options=strict))

    assert result.status == CommandStatus.FAILED
    assert [r.name for r in result.remaining] == ["loner"] and "unmanaged" in result.remaining[0].why
    assert sorted(p["metadata"]["uid"] for p in non_daemonset_pods(world, target)) == before  # nothing evicted
    assert node_json(world, target)["spec"]["unschedulable"] is True  # cordoned, as kubectl leaves it


def test_second_drain_of_a_drained_node_succeeds_at_once(
    world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine
) -> None:
    target = workers(world)[5]["metadata"]["name"]
    deploy_pods_on_node(world.rest, target, 5, namespace="bench", name="again")
    cmd = command(CommandKind.DRAIN, instance_of(node_json(world, target)))

    first = engine.run(cmd)
    second = engine.run(cmd)  # SQS redelivery of the same command

    assert first.status == second.status == CommandStatus.SUCCEEDED
    assert len([p for p in first.pods if p.action == PodAction.EVICT]) == 5
    assert second.cordoned_by_us and second.remaining == []
    assert [p for p in second.pods if p.action != PodAction.SKIP] == []  # nothing left to evict
    print(f"\nsecond drain took {second.durations.total:.3f} s")


def test_measure_drain_of_30_grace0_pods(world: LocalWorld, cluster: ClusterInfo, engine: DrainEngine) -> None:
    """Measures (prints, asserts no time) the engine against ``kubectl drain`` on a node of the same load."""
    ours, theirs = workers(world)[6]["metadata"]["name"], workers(world)[7]["metadata"]["name"]
    deploy_pods_on_node(world.rest, ours, 30, grace=0, namespace="bench", name="thirty-a", timeout=30)
    deploy_pods_on_node(world.rest, theirs, 30, grace=0, namespace="bench", name="thirty-b", timeout=30)

    result = engine.run(command(CommandKind.DRAIN, instance_of(node_json(world, ours))))
    assert result.status == CommandStatus.SUCCEEDED
    assert len([p for p in result.pods if p.action == PodAction.EVICT and p.gone]) == 30
    assert non_daemonset_pods(world, ours) == []
    # the drain's watch and eviction threads end with it (no thread left per drain)
    limit = time.monotonic() + 3
    while any(t.name in (f"watch-{ours}",) or t.name.startswith("evict") for t in threading.enumerate()):
        assert time.monotonic() < limit, [t.name for t in threading.enumerate()]
        time.sleep(0.05)

    started = time.monotonic()
    kubectl = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            str(world.kubeconfig),
            "drain",
            theirs,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
            "--timeout=60s",
        ],
        capture_output=True,
        text=True,
        timeout=90,
    )
    kubectl_seconds = time.monotonic() - started
    d = result.durations
    print(
        f"\n30 grace-0 pods: engine {d.total:.3f} s (resolve {d.resolve:.3f}, cordon {d.cordon:.3f}, "
        f"evict {d.evict:.3f}, wait {d.wait:.3f}); kubectl drain {kubectl_seconds:.3f} s (rc {kubectl.returncode})"
    )


def test_event_for_an_outcome_decided_without_the_engine(world: LocalWorld, cluster: ClusterInfo) -> None:
    target = workers(world)[0]["metadata"]["name"]
    recorder = NodeEventRecorder(KubeAdapter(world.agent_api), host="test-agent")
    recorder(target, CommandKind.DRAIN, CommandStatus.TIMED_OUT, "deadline passed before start")
    (event,) = node_events(world, target)
    assert (event["reason"], event["type"], event["message"]) == (
        "NodeDrainTimedOut",
        "Warning",
        "deadline passed before start",
    )
    assert event["source"] == {"component": "aws-node-manager", "host": "test-agent"}


def test_failing_to_post_the_event_does_not_fail_the_command(world: LocalWorld, cluster: ClusterInfo) -> None:
    cfg = world.kube.configuration("agent")
    assert cfg.api_key, "the agent's configuration authenticates with a bearer token"
    cfg.api_key = dict.fromkeys(cfg.api_key, "Bearer not-a-valid-token")
    cfg.api_key_prefix = {}
    cfg.refresh_api_key_hook = None  # load_kube_config's hook would put the real token back
    unauthenticated = make_api_client(cfg)
    try:
        kube = KubeAdapter(world.agent_api)
        engine = DrainEngine(kube, Backoff(), events=NodeEventRecorder(KubeAdapter(unauthenticated)))
        target = workers(world)[1]
        result = engine.run(command(CommandKind.CORDON, instance_of(target)))
    finally:
        unauthenticated.close()
    assert result.status == CommandStatus.SUCCEEDED and not result.event_posted
    assert node_json(world, target["metadata"]["name"])["spec"]["unschedulable"] is True
    assert node_events(world, target["metadata"]["name"]) == []
