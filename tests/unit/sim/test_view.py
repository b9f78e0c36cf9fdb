"""The invariant checker's reads of the table (``sim.view.View``): each kind from its own partition
(``core.schema.partition_for``). A prefix read from the wrong partition answers nothing, and every check over
``CMD#`` or ``RUN#`` items would hold vacuously. Its whole-cluster answers, cached against version counters, equal
fresh ones; and a budget added to a running cluster counts the pods judging each pod would."""

from __future__ import annotations

import random
from collections import deque
from datetime import UTC, datetime

import pytest

from core.schema import agent_partition_of
from sim.aws_state import Instance, PlacementEpoch
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_model import BudgetCounts
from sim.kube_objects import Budget
from sim.run import run_seed
from sim.view import Nodes
from sim.world import AZS, CLUSTER, Shape, World
from sim.world_view import NodeState


def test_the_checker_reads_commands_from_the_agent_partition_and_the_lock_from_the_cluster_one() -> None:
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    world.run(120.0)
    instance = world.pick_instance(AZS[0])
    assert instance is not None
    with world.kernel.installed():
        assert world.aws.interrupt(instance)
    world.run(world.kernel.t + 30.0)

    commands = world.view.table_prefix("CMD#")
    assert [c["instance_id"] for c in commands if str(c["sk"]).startswith("CMD#spot-")] == [instance]
    assert all(c["pk"] == agent_partition_of(CLUSTER) for c in commands)
    assert world.view.table_item(str(commands[0]["sk"])) == commands[0]
    lock = world.view.table_item("LOCK")
    assert lock is None or lock["pk"] != agent_partition_of(CLUSTER)


@pytest.mark.parametrize("seed", [0, 3])
def test_the_cached_whole_cluster_answers_equal_fresh_ones_along_a_run(seed: int) -> None:
    """With ``verify`` every cached answer of ``node_states``, ``node_index``, ``running_instances`` and
    ``running_per_group`` is compared with one made afresh (an ``AssertionError`` otherwise); the run is the same."""

    def verify(world: World) -> None:
        world.view.verify = True

    checked = run_seed(seed, 30, 1.0, mutate=verify)
    assert checked.digest == run_seed(seed, 30, 1.0).digest
    assert checked.violation is None and checked.counters["checks"] > 1000


def test_verify_finds_a_change_no_version_counter_saw() -> None:
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    world.run(120.0)
    world.view.verify = True
    name = next(iter(world.kube.nodes))
    assert not world.view.node_states()[0].unschedulable
    world.kube.nodes[name]["spec"]["unschedulable"] = True  # behind the cluster's back: no node event
    world.kube.nodes[name]["metadata"]["resourceVersion"] = "changed"
    with pytest.raises(AssertionError):
        world.view.node_states()
    instance = next(iter(world.view.running_instances()))
    object.__setattr__(world.cloud.instances[instance], "state", "terminated")  # not through Instance.__setattr__
    with pytest.raises(AssertionError):
        world.view.running_instances()


def test_open_commands_follow_the_table_s_writes_and_verify_finds_one_they_missed() -> None:
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    world.run(120.0)
    view, table = world.view, world.table
    assert "i-0open" not in view.open_command_instances()
    key = (view.agent_partition, "CMD#spot-open")
    table.store(key, {"pk": key[0], "sk": key[1], "status": "queued", "instance_id": "i-0open"}, 100)
    assert "i-0open" in view.open_command_instances()
    table.store(key, {"pk": key[0], "sk": key[1], "status": "succeeded", "instance_id": "i-0open"}, 100)
    assert "i-0open" not in view.open_command_instances()
    view.verify = True
    table._items[key[0]][key[1]] = {"pk": key[0], "sk": key[1], "status": "running", "instance_id": "i-0open"}
    with pytest.raises(AssertionError):  # written behind the listeners' back
        view.open_command_instances()


class EveryPod(SimKube):
    """``add_budget`` as it judged every pod (before the groups of alike pods): the reference."""

    def add_budget(self, budget: Budget) -> None:
        key = f"{budget.namespace}/{budget.name}"
        self.budgets[key] = budget
        self.budget_counts[key] = BudgetCounts()
        self._index.add_budget(key, budget)  # filed for the pods made later (``sim.kube_model.BudgetIndex``)
        self._selecting.clear()
        for info in self.pods.values():
            if self._selects(key, info):
                self._match(info, key)


@pytest.mark.parametrize("seed", range(4))
def test_a_budget_counts_the_pods_judging_each_would(seed: int) -> None:
    """``add_budget`` judges a group of alike pods once; the counts and each pod's budgets are those of judging
    every pod (random controllers, hand-made pods, pods deleted, two namespaces, a Deployment made again with other
    labels), on two clusters given the same random operations."""
    clusters = [SimKube(Kernel(seed)), EveryPod(Kernel(seed))]
    rng = random.Random(seed)
    for n in range(4):
        for kube in clusters:
            kube.add_node(f"node-{n}", f"i-0{n:016x}", "us-east-1a")
    for kube in clusters:
        kube.add_daemonset("kube-system", "agent")
    for k in range(80):
        roll = rng.random()
        namespace = rng.choice(["default", "other"])
        labels = {"app": f"a{rng.randrange(6)}", **({"tier": "web"} if rng.random() < 0.5 else {})}
        name, replicas, node = f"d{rng.randrange(8)}", rng.randint(0, 4), f"node-{rng.randrange(4)}"
        selector = dict(rng.sample(sorted({**labels, "tier": "web"}.items()), rng.randint(0, 2)))
        gone = rng.randrange(1000)
        for kube in clusters:
            if roll < 0.3:
                kube.add_deployment(namespace, name, replicas, labels=labels)
            elif roll < 0.5:
                kube.add_pod(namespace, f"p{k % 30}", node=node, labels=labels)  # a name again: a new pod
            elif roll < 0.6 and kube.pods:
                kube._remove(list(kube.pods.values())[gone % len(kube.pods)])
            else:
                kube.add_budget(Budget(namespace, f"b{k}", selector, max_unavailable=1))
    ours, reference = clusters
    assert len(ours.budgets) > 10
    assert ours.budget_counts == reference.budget_counts
    assert {k: i.budgets for k, i in ours.pods.items()} == {k: i.budgets for k, i in reference.pods.items()}


def churn(world: World, rng: random.Random, steps: int) -> None:
    """Random changes of the nodes through the cluster's API (nodes joining, a name joining again, nodes leaving,
    Ready toggled, cordoned by us or not, an operator's cordon), each followed by the view's answers (``verify``)."""
    kube, view = world.kube, world.view
    for _ in range(steps):
        for _ in range(rng.randint(1, 3)):
            names = list(kube.nodes)
            roll = rng.random()
            if roll < 0.25 or not names:
                k = rng.randrange(40)  # names and instances come back: a node of a name seen before goes last
                kube.add_node(f"n{k}", f"i-{rng.randrange(30):017x}", AZS[k % 3], control_plane=k % 13 == 0)
            elif roll < 0.4:
                kube.remove_node(rng.choice(names))
            elif roll < 0.6:
                kube.set_node_ready(rng.choice(names), rng.random() < 0.7)
            elif roll < 0.85:
                annotations = {"node-manager.aws/cordoned-by": "x"} if rng.random() < 0.6 else {}
                patch = {"spec": {"unschedulable": rng.random() < 0.6}, "metadata": {"annotations": annotations}}
                kube.patch_node(rng.choice(names), patch)
            else:
                world.operators.symmetric_difference_update({rng.choice(names)})  # no node event
        view.node_states()
        view.node_index()
        view.nodes_of({f"i-{rng.randrange(30):017x}" for _ in range(3)})


@pytest.mark.parametrize("seed", range(3))
def test_the_nodes_kept_between_answers_equal_nodes_read_afresh(seed: int) -> None:
    """The view brings its nodes up to the cluster's node events since its last answer (``View._follow``); with
    ``verify`` every answer (the list in the nodes' order, the index, ``nodes_of``) is compared with one read afresh.
    A log too short to hold every event since the last answer means a read of every node (still verified)."""
    world = World.build(seed, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    world.view.verify = True
    rng = random.Random(seed)
    churn(world, rng, 300)
    assert len(world.kube.node_log) < (world.kube.node_log.maxlen or 0)
    world.kube.node_log = deque(world.kube.node_log, maxlen=4)
    churn(world, rng, 100)
    world.kube.node_log = deque(maxlen=0)
    churn(world, rng, 20)


def test_verify_finds_a_node_the_kept_states_missed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bookkeeping slip of the kept nodes (an index entry, a copy of the index's sets or a node's place not
    updated) fails the next answer."""
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    view, kube = world.view, world.kube
    view.verify = True
    churn(world, random.Random(5), 20)
    put = Nodes.put

    def no_ready(kept: Nodes, state: NodeState) -> None:
        put(kept, state)
        kept.ready.discard(state.name)

    monkeypatch.setattr(Nodes, "put", no_ready)
    name = next(
        n for n, obj in kube.nodes.items() if "node-role.kubernetes.io/control-plane" not in obj["metadata"]["labels"]
    )
    kube.set_node_ready(name, False)
    view.node_states()
    with pytest.raises(AssertionError):
        kube.set_node_ready(name, True)
        view.node_states()

    def unmoved(kept: Nodes, state: NodeState) -> None:
        put(kept, state)
        kept.moved = (False, False)  # the index's copies kept though the Ready workers changed

    def read_all_again() -> None:
        monkeypatch.setattr(Nodes, "put", put)
        view._log_seen = None  # as after a log that dropped events: every node read again
        kube.set_node_ready(name, True)
        view.node_states()

    read_all_again()
    monkeypatch.setattr(Nodes, "put", unmoved)
    with pytest.raises(AssertionError):
        kube.set_node_ready(name, False)
        view.node_states()
    read_all_again()
    view._kept.place[next(iter(kube.nodes))] = 10**9  # the first node's place taken for the last
    with pytest.raises(AssertionError):
        view.nodes_of(set(kube.node_instance.values()))


def test_running_instances_follow_the_placement_changes_and_verify_finds_one_they_missed() -> None:
    """``running_instances`` and ``running_per_group`` are brought up to the instances ``PlacementEpoch.changes``
    names since the last answer; a bump it does not name is a change they miss, which ``verify`` finds. Changes the
    log no longer holds mean a read of every instance."""
    world = World.build(5, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    world.run(120.0)
    view, cloud = world.view, world.cloud
    view.verify = True
    first, second, third = list(view.running_instances())[:3]
    group = cloud.instances[first].group
    assert group is not None and view.running_per_group()[group] >= 1
    cloud.instances[first].state = "shutting-down"
    cloud.instances[second].group = None  # detached: running, in no group
    assert first not in view.running_instances() and view.running_instances()[second][0] is None
    cloud.instances[first].state = "running"
    PlacementEpoch.changes.clear()  # the log lost that change: every instance is read again
    cloud.instances[second].group = group
    assert first in view.running_instances() and view.running_instances()[second][0] == group
    object.__setattr__(cloud.instances[third], "state", "terminated")  # not through Instance.__setattr__
    PlacementEpoch.value += 1  # a bump no change is told for
    with pytest.raises(AssertionError):
        view.running_instances()


def test_an_instance_is_slotted_and_its_placement_still_goes_through_setattr() -> None:
    """``Instance`` keeps its fields in slots (no ``__dict__``: a look-up of many instances, the agent's group
    rechecks, touches one block each); every placement change still passes ``Instance.__setattr__``."""
    inst = Instance("i-1", "us-east-1a", "m5.large", "", datetime(2026, 1, 1, tzinfo=UTC), "lt-1", "1", {})
    assert not hasattr(inst, "__dict__")
    before = PlacementEpoch.value
    inst.group, inst.lifecycle_state, inst.state = "nodes", "InService", "running"
    assert PlacementEpoch.value == before + 2
    assert list(PlacementEpoch.changes)[-2:] == [(before + 1, "i-1"), (before + 2, "i-1")]
    assert (inst.group, inst.lifecycle_state, inst.state, inst.health) == ("nodes", "InService", "running", "Healthy")
