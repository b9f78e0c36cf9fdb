"""The simulated agent runs the product's command handling on simulated time: a drain through the real worker,
Store, drain policy, eviction retries and lifecycle completion; a Spot drain deleting past a budget at its deadline;
a restart losing in-flight work that another start takes over once stale; membership; determinism."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.hooks import get_hook, record_hook
from core.lifecycle import LifecycleAction
from core.model import CommandKind
from core.schema import agent_partition_of
from localworld.cluster import create_kops_cluster
from sim.agent import SimAgent
from sim.faults import Faults
from sim.kube_objects import Budget
from tests.unit.sim.agent_world import CLUSTER, NS, World, drain


@pytest.fixture(params=["moto", "memory"])
def table(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The state table: moto's (through boto3), or the simulation's own ``sim.dynamo`` (made per world, on its
    kernel: ``World`` builds it when given "memory")."""
    if request.param == "memory":
        yield "memory"
        return
    session = boto3.Session(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")
    with mock_aws():
        info = create_kops_cluster(session, name=CLUSTER, azs=())
        yield session.resource("dynamodb").Table(info.table_name)


N0 = "i-00000000000000000"


def test_a_drain_evicts_through_the_budget_one_pod_at_a_time_and_ends_succeeded(table: Any) -> None:
    w = World(table)
    assert len(w.kube.by_node["n0"]) == 3  # cni and two web pods
    w.send(drain(w.kernel, "d1", N0, 900))
    w.run(3)
    node = w.kube.node_view("n0")
    assert node is not None and node.unschedulable and node.cordoned_by == "d1"
    assert w.item("d1")["status"] == "running" and w.item("d1")["worker"] == "agent:0"
    w.run(120)
    item = w.item("d1")
    assert item["status"] == "succeeded", item["result"]["message"]
    assert list(w.kube.by_node["n0"]) == ["kube-system/cni-n0"]
    assert w.kube.counters.stopped_by_eviction == 2 and w.kube.counters.evictions_refused >= 1
    assert w.kube.counters.killed_by_reclaim == 0
    assert w.queue.messages == [] and item["reported_at"]
    results = [e["DetailType"] for e in w.agent.events.entries if e["DetailType"] != "Node Ready"]
    assert results == ["Node Drain Succeeded"]  # (the first resync also reported the nodes Ready: agent.ready)
    pods = {p["name"]: p for p in item["result"]["pods"]}
    assert all(p["gone"] for p in pods.values() if p["action"] == "evict")
    assert max(p["attempts"] for p in pods.values()) > 1  # the second waited for the budget


def test_a_spot_drain_deletes_past_the_budget_before_its_deadline_and_completes_the_lifecycle_action(
    table: Any,
) -> None:
    w = World(table, lifecycle_heartbeat_seconds=30)
    w.kube.scale(NS, "web", 6)
    w.kube.budgets[f"{NS}/web"] = Budget(NS, "web", {"app": "web"}, min_available=6)  # no disruption allowed
    action = LifecycleAction(instance_id=N0, asg_name="nodes", hook_name="drain", token="tok")
    with w.kernel.installed():
        record_hook(w.store, action, ttl_seconds=3600)
    start = w.kernel.t
    w.send(drain(w.kernel, "spot-1", N0, 120, reason="spot-interruption:terminate"))
    w.run(130)
    item = w.item("spot-1")
    assert item["status"] == "succeeded", item["result"]["message"]
    graces = {p["grace_source"] for p in item["result"]["pods"] if p["action"] == "evict"}
    assert graces == {"pdb-deadline"}
    assert w.kube.counters.stopped_by_delete == 2 and w.kube.counters.stopped_by_eviction == 0
    # received at once (a long poll), deleted when the grace (20 s) stopped fitting before the deadline minus the
    # margin (10 s): ~89 s in
    assert [t - start for t, _ in w.autoscaling.completed] == pytest.approx([89 + 20], abs=3)
    # RecordLifecycleActionHeartbeat every 30 s of simulated time (the heartbeat beats every 10 s) until the end
    assert [(t - start, i) for t, i in w.autoscaling.heartbeats] == [(30.0, N0), (60.0, N0), (90.0, N0)]
    hook = get_hook(w.store, N0)
    assert hook is not None and hook["state"] != "pending"


def test_a_restart_loses_the_drain_and_a_later_start_takes_it_over_once_stale(table: Any) -> None:
    w = World(table)
    w.kube.budgets[f"{NS}/web"] = Budget(NS, "web", {"app": "web"}, min_available=6)  # blocks: the drain stays
    w.send(drain(w.kernel, "d2", N0, 1800))
    w.run(10)
    assert w.item("d2")["status"] == "running"
    w.agent.restart(down_seconds=5)
    w.run(40)
    assert w.item("d2")["worker"] == "agent:0"  # not stale yet: the new process leaves it
    w.kube.budgets[f"{NS}/web"] = Budget(NS, "web", {"app": "web"}, min_available=5)
    w.run(200)
    item = w.item("d2")
    assert item["status"] == "succeeded" and item["worker"] == "agent:1" and int(item["attempt"]) == 2
    assert w.agent.counts == {"restarts": 1}


def test_an_uncordon_command_gives_back_our_cordon_and_membership_records_every_node(table: Any) -> None:
    w = World(table, membership_resync_seconds=60)
    w.send(drain(w.kernel, "c1", N0, 600, kind=CommandKind.CORDON))
    w.run(5)
    node = w.kube.node_view("n0")
    assert node is not None and node.unschedulable
    w.send(drain(w.kernel, "u1", N0, 600, kind=CommandKind.UNCORDON))
    w.run(60)
    node = w.kube.node_view("n0")
    assert node is not None and not node.unschedulable and node.cordoned_by is None
    assert w.item("u1")["status"] == "succeeded"
    assert sorted(r.instance_id for r in w.store.recorded_nodes()) == sorted(w.kube.instances)


def test_one_seed_gives_one_run(table: Any) -> None:
    def trace(seed: int) -> list[tuple[float, str]]:
        w = World(table, seed=seed)
        steps: list[tuple[float, str]] = []
        w.send(drain(w.kernel, f"s{seed}-{len(w.queue.deleted)}", N0, 900))
        with w.kernel.installed():
            w.kernel.run(w.kernel.t + 200, after_step=lambda s: steps.append((s.at, s.label)))
        return steps

    first = trace(11)
    if table != "memory":
        table.delete_item(Key={"pk": agent_partition_of(CLUSTER), "sk": "CMD#s11-0"})
    assert trace(11) == first


def test_the_leaders_releaser_gives_back_a_rebalance_cordon_after_its_quiet_period_but_not_an_operators(
    table: Any,
) -> None:
    w = World(table, cordon_check_seconds=60)
    with w.kernel.installed():
        operator = w.kube.patch_node("n1", {"spec": {"unschedulable": True}})  # kubectl cordon n1
    assert operator is not None
    w.send(
        drain(w.kernel, "rebalance-0", N0, 600, reason="rebalance", kind=CommandKind.CORDON, uncordon_after_seconds=300)
    )
    w.send(
        drain(
            w.kernel,
            "rebalance-1",
            "i-00000000000000001",
            600,
            reason="rebalance",
            kind=CommandKind.CORDON,
            uncordon_after_seconds=300,
        )
    )
    w.run(250)
    n0, n1 = w.kube.node_view("n0"), w.kube.node_view("n1")
    assert n0 is not None and n0.unschedulable and n1 is not None and n1.unschedulable
    w.run(120)  # quiet period over, one check later
    n0, n1 = w.kube.node_view("n0"), w.kube.node_view("n1")
    assert n0 is not None and not n0.unschedulable and n0.cordoned_by is None
    assert n1 is not None and n1.unschedulable  # someone else's cordon stays
    assert w.item("rebalance-0")["resolution"] == "released"
    assert w.item("rebalance-1")["resolution"].startswith("nothing to give back")
    w.agent.lead(False)
    w.send(
        drain(w.kernel, "rebalance-2", N0, 600, reason="rebalance", kind=CommandKind.CORDON, uncordon_after_seconds=60)
    )
    w.run(300)
    assert w.item("rebalance-2")["status"] == "queued"  # a standby runs nothing
    w.agent.lead(True)
    w.run(200)
    assert w.item("rebalance-2")["resolution"] == "released"


def test_an_api_outage_when_the_drain_starts_is_retried_within_the_budget_and_the_drain_runs_after(table: Any) -> None:
    from sim.faults import FaultWindow

    w = World(table)
    w.kube.faults = Faults(w.kernel)
    w.kube.faults.add(FaultWindow("kube", "list_pods", 0, w.kernel.t + 20, "InternalError"))
    w.send(drain(w.kernel, "d3", N0, 900))
    w.run(3)
    assert w.item("d3")["status"] == "running"  # the drain runs again after a backoff, as _execute_or_give_back does
    w.run(120)
    item = w.item("d3")
    assert item["status"] == "succeeded" and int(item["attempt"]) == 1
    counters = w.agent.worker.counters.snapshot()
    assert counters.get("retried") is None and counters.get("retry_run", 0) >= 2, counters
    assert w.kube.faults.injected["kube:list_pods:InternalError"] >= 2


def test_an_api_outage_that_outlasts_the_retries_hands_the_command_back_and_it_runs_after(table: Any) -> None:
    from sim.faults import FaultWindow

    w = World(table)
    w.agent.worker.retry = replace(w.agent.worker.retry, budget_seconds=0)  # COMMAND_RETRY_SECONDS=0: no retry
    w.kube.faults = Faults(w.kernel)
    w.kube.faults.add(FaultWindow("kube", "list_pods", 0, w.kernel.t + 20, "InternalError"))
    w.send(drain(w.kernel, "d3", N0, 900))
    w.run(3)
    item = w.item("d3")
    assert item["status"] == "queued" and w.agent.worker.counters.snapshot().get("retried") == 1
    w.run(120)
    item = w.item("d3")
    assert item["status"] == "succeeded" and int(item["attempt"]) > 1
    assert w.kube.faults.injected["kube:list_pods:InternalError"] >= 1


def test_a_leader_that_loses_its_lease_hands_its_drain_back_and_the_new_leader_finishes_it(table: Any) -> None:
    w = World(table)
    w.kube.budgets[f"{NS}/web"] = Budget(NS, "web", {"app": "web"}, min_available=6)  # blocks: the drain stays
    with w.kernel.installed():
        standby = SimAgent(
            w.kernel, w.kube, w.queue, w.agent.store.table, w.autoscaling, w.settings, name="standby", leader=False
        )
    w.send(drain(w.kernel, "d4", N0, 1800))
    w.run(10)
    assert w.item("d4")["worker"] == "agent:0"
    w.agent.lead(False)
    w.run(w.settings.shutdown_grace_seconds + 1)
    assert w.item("d4")["status"] == "queued"  # handed back, not left to go stale
    assert w.agent.counts == {"leadership_lost": 1, "handed_back": 1, "restarts": 1}
    standby.lead(True)
    w.kube.budgets[f"{NS}/web"] = Budget(NS, "web", {"app": "web"}, min_available=5)
    w.run(150)
    item = w.item("d4")
    assert item["status"] == "succeeded" and item["worker"] == "standby:0"
    assert w.agent.worker_id == "agent:1" and not w.agent.leading


def test_a_restart_of_a_process_already_down_and_a_step_down_after_a_crash_change_nothing(table: Any) -> None:
    w = World(table)
    w.agent.lead(False)  # a step-down is due after the shutdown grace
    w.agent.restart(down_seconds=5)  # but the process crashes first
    w.agent.restart(down_seconds=5)  # already down
    w.run(60)
    assert w.agent.counts == {"leadership_lost": 1, "restarts": 1} and w.agent.worker_id == "agent:1"
    assert w.agent.alive and not w.agent.leading
    assert len(w.agent._timers) == 3  # one set of periodic actions (heartbeat, membership, cordons)
    assert w.agent._wake is None  # a standby has no receive pending
