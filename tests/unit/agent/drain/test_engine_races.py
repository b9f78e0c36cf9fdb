"""The drain engine on an in-memory cluster (``fakecluster``) while the node's cordon or pods change under a running
drain: an uncordon command for the node, an operator's uncordon, a pod re-created under the same name."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from agent.drain.cordon import ENDING_ANNOTATION
from agent.drain.engine import DrainEngine
from agent.drain.results import NodeCommandResult
from agent.kube.eviction import EvictionResponse
from agent.kube.views import NodeView, PodView
from core.model import Command, CommandKind, CommandStatus, utcnow
from core.settings import AgentSettings
from tests.unit.agent.drain.fakecluster import EVICT, INSTANCE, PDB, FakeCluster, pod

SETTINGS = AgentSettings(
    cluster_name="demo", table_name="t", queue_url="q", eviction_backoff_seconds=0.05, eviction_backoff_max_seconds=0.1
)


def command(
    command_id: str, kind: str = "drain", reason: str = "refresh r1 step 0", deadline_in: float = 30
) -> Command:
    return Command(
        command_id=command_id,
        cluster="demo",
        kind=CommandKind(kind),
        instance_id=INSTANCE,
        node_name="n1",
        reason=reason,
        deadline=utcnow() + timedelta(seconds=deadline_in),
    )


def pdb_until(allowed: threading.Event) -> Callable[[int | None], EvictionResponse]:
    """A PodDisruptionBudget refuses the pod's eviction until ``allowed`` is set."""
    return lambda grace: EVICT if allowed.is_set() else PDB


def start(engine: DrainEngine, cmd: Command, kube: FakeCluster) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``cmd`` on a thread; return once its first eviction was sent."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: out.update(result=engine.run(cmd)), daemon=True)
    thread.start()
    until = time.monotonic() + 5
    while not kube.evictions and time.monotonic() < until:
        time.sleep(0.01)
    assert kube.evictions, "the drain never sent an eviction"
    return thread, out


def finish(thread: threading.Thread, out: dict[str, Any]) -> NodeCommandResult:
    thread.join(10)
    assert not thread.is_alive()
    result = out["result"]
    assert isinstance(result, NodeCommandResult)
    return result


def test_an_uncordon_command_leaves_the_cordon_of_a_drain_running_in_the_engine() -> None:
    kube = FakeCluster()
    kube.add_pod(pod("a"))
    allowed = threading.Event()
    kube.policy["web/a"] = pdb_until(allowed)
    engine = DrainEngine(kube, SETTINGS)  # type: ignore[arg-type]
    thread, out = start(engine, command("refresh-r1-0"), kube)
    assert kube.nodes["n1"].cordoned_by == "refresh-r1-0"
    # a late uncordon for the same instance (a give-back kept, a sweep's re-send) arrives meanwhile
    uncordon = engine.run(command("replenish-giveback-uncordon-1", kind="uncordon"))
    assert uncordon.status is CommandStatus.SUCCEEDED and not uncordon.uncordoned
    assert "being drained by command refresh-r1-0" in uncordon.message
    assert kube.nodes["n1"].unschedulable
    allowed.set()
    result = finish(thread, out)
    assert result.status is CommandStatus.SUCCEEDED and result.cordoned_by_us
    assert kube.nodes["n1"].unschedulable and kube.nodes["n1"].cordoned_by == "refresh-r1-0"
    # the drain over, an uncordon undoes its cordon as before
    after = engine.run(command("replenish-giveback-uncordon-2", kind="uncordon"))
    assert after.uncordoned and not kube.nodes["n1"].unschedulable


def test_an_operator_uncordon_during_the_drain_is_met_with_our_cordon() -> None:
    kube = FakeCluster()
    kube.set_node("n1", unschedulable=True)  # an operator's kubectl cordon, before the Spot warning
    kube.add_pod(pod("a"))
    allowed = threading.Event()
    kube.policy["web/a"] = pdb_until(allowed)
    engine = DrainEngine(kube, SETTINGS)  # type: ignore[arg-type]
    thread, out = start(engine, command("spot-1", reason="spot-interruption:terminate"), kube)
    assert kube.nodes["n1"].cordoned_by is None  # theirs: left as it is
    kube.set_node("n1", unschedulable=False)  # the operator uncordons their cordon during our drain
    allowed.set()
    result = finish(thread, out)
    assert result.status is CommandStatus.SUCCEEDED and "cordoned again as ours" in result.message
    assert result.cordoned_by_us and not result.cordoned_by_other
    node = kube.nodes["n1"]
    assert node.unschedulable and node.cordoned_by == "spot-1"
    assert node.annotations[ENDING_ANNOTATION] == "spot-1"  # the instance ends: never given back


class LandsWhileSchedulable(FakeCluster):
    """Once the drain's pods are gone, the operator uncordons the node and the scheduler places a pod on it before
    the drain reads the node again (after its watch stopped)."""

    def __init__(self) -> None:
        super().__init__()
        self.landed = False

    def get_node(self, name: str) -> NodeView | None:
        if self.evictions and not self.landed and "web/a" not in self.pods:
            self.landed = True
            self.set_node("n1", unschedulable=False)
            self.add_pod(pod("late"))
        return super().get_node(name)


def test_a_pod_placed_while_the_node_was_uncordoned_is_evicted_after_the_cordon_is_taken_again() -> None:
    kube = LandsWhileSchedulable()
    kube.add_pod(pod("a"))
    engine = DrainEngine(kube, SETTINGS)  # type: ignore[arg-type]
    result = engine.run(command("refresh-r1-0"))
    assert kube.landed and "web/late" in [key for key, _ in kube.evictions] and "web/late" not in kube.pods
    assert result.status is CommandStatus.SUCCEEDED and result.cordoned_by_us
    assert {p.name for p in result.pods if p.gone} == {"a", "late"}
    assert kube.nodes["n1"].unschedulable and kube.nodes["n1"].cordoned_by == "refresh-r1-0"


def test_a_pod_recreated_on_the_node_under_the_same_name_is_evicted_too() -> None:
    """A StatefulSet pod that tolerates the unschedulable taint, recreated by its controller under the same name on
    the node being drained, leaves with the others instead of dying with the instance."""
    kube = FakeCluster()
    kube.add_pod(pod("db-0", uid="u1", kind="StatefulSet"))
    recreated = threading.Event()

    def controller(gone: PodView) -> None:
        if gone.uid == "u1":
            kube.add_pod(pod("db-0", uid="u2", kind="StatefulSet"))
            recreated.set()

    kube.on_gone = controller
    engine = DrainEngine(kube, SETTINGS)  # type: ignore[arg-type]
    result = engine.run(command("spot-1", reason="spot-interruption:terminate", deadline_in=5))
    assert recreated.is_set() and result.status is CommandStatus.SUCCEEDED
    assert not [p.key for p in kube.pods.values() if p.node_name == "n1"]
    assert [(p.uid, p.gone) for p in result.pods] == [("u1", True), ("u2", True)]


def test_an_uncordon_command_leaves_the_cordon_of_a_drain_the_consumer_holds_waiting_for_a_slot() -> None:
    kube = FakeCluster()
    engine = DrainEngine(kube, SETTINGS)  # type: ignore[arg-type]
    engine.cordon(command("refresh-r1-0"))  # the consumer's fast step; the drain then waits for a slot
    in_flight: set[str] = {"refresh-r1-0"}
    engine.drains_in_flight = lambda: frozenset(in_flight)  # as WorkerBase wires it
    uncordon = engine.run(command("replenish-giveback-uncordon-1", kind="uncordon"))
    assert not uncordon.uncordoned and "being drained by command refresh-r1-0" in uncordon.message
    assert kube.nodes["n1"].unschedulable
    in_flight.clear()  # the drain ended (handed back, say): an uncordon undoes its cordon
    assert engine.run(command("replenish-giveback-uncordon-2", kind="uncordon")).uncordoned
    assert not kube.nodes["n1"].unschedulable
