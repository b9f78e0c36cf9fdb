"""One drain on simulated time (``sim.agent_drain.SimDrain``) through the product's drain rules: a refused plan
evicts nothing, the control-plane cap, a missing node ends with the engine's error, a Spot warning tightening a
rebalance drain makes it delete past a budget, and an uncordon after a failed drain when asked, never of a node whose
instance is ending."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.drain.cordon import ENDING_ANNOTATION
from agent.drain.engine import DrainEngine
from agent.drain.policy import PodAction
from agent.drain.results import NodeCommandResult
from core.exceptions import ControlPlaneBusyError, ControlPlaneRefusedError, NodeNotFoundError
from core.model import Command, CommandKind, CommandStatus, DrainOptions
from core.settings import AgentSettings, PdbDeadlinePolicy
from sim.agent_drain import SimDrain
from sim.kernel import Kernel
from sim.kube import SimKube
from sim.kube_objects import Budget

NS = "default"
SETTINGS = AgentSettings(cluster_name="demo", table_name="t", queue_url="q")


class Drains:
    def __init__(self) -> None:
        self.kernel = Kernel(3)
        self.kube = SimKube(self.kernel)
        self.kube.add_node("m0", "i-0000000000000aaa0", "us-east-1a", control_plane=True)
        self.kube.add_node("m1", "i-0000000000000aaa1", "us-east-1b", control_plane=True)
        for i in range(3):
            self.kube.add_node(f"n{i}", f"i-{i:017x}", "us-east-1a")
        self.engine = DrainEngine(self.kube, SETTINGS, clock=self.kernel)
        self.ends: list[NodeCommandResult | Exception] = []
        self.busy = 0

    def start(
        self, instance: str, seconds: float = 600, reason: str = "test", command_id: str = "", **options: Any
    ) -> SimDrain:
        with self.kernel.installed():
            command = Command(
                command_id=command_id or f"c-{instance}",
                cluster="demo",
                kind=CommandKind.DRAIN,
                instance_id=instance,
                reason=reason,
                deadline=self.kernel.now() + timedelta(seconds=seconds),
                options=DrainOptions(**options),
            )
            drain = SimDrain(
                self.kernel,
                self.kube,
                self.engine,
                command,
                self.kernel.stream("b").random,
                lambda d, end: self.ends.append(end),
                lambda: self.busy,
            )
            drain.start()
        return drain

    def run(self, seconds: float) -> None:
        with self.kernel.installed():
            self.kernel.run(self.kernel.t + seconds)

    def result(self, index: int = -1) -> NodeCommandResult:
        end = self.ends[index]
        assert isinstance(end, NodeCommandResult)
        return end


def test_a_refused_plan_evicts_nothing_and_a_missing_node_ends_with_the_engines_error() -> None:
    d = Drains()
    d.kube.add_pod(NS, "bare", node="n0")
    d.start("i-00000000000000000", force=False)
    result = d.result()
    assert result.status is CommandStatus.FAILED and "refused" in result.message
    assert d.kube.pod(NS, "bare") is not None and d.kube.counters.stopped_by_eviction == 0
    d.start("i-0000000000000dead")
    assert isinstance(d.ends[-1], NodeNotFoundError)


def test_a_control_plane_drain_goes_through_the_products_guard_untouched_when_refused_or_busy() -> None:
    d = Drains()
    d.start("i-0000000000000aaa0", reason="test")  # no master step nor deadline-bound interruption: refused
    assert isinstance(d.ends[-1], ControlPlaneRefusedError)
    first = d.start("i-0000000000000aaa0", reason="spot-interruption:terminate")
    assert first.control_plane
    d.start("i-0000000000000aaa1", reason="spot-interruption:terminate")  # the cluster's one slot is held
    assert isinstance(d.ends[-1], ControlPlaneBusyError)
    node = d.kube.node_view("m2") or d.kube.node_view("m1")
    assert node is not None


def test_a_spot_deadline_tightening_a_rebalance_drain_deletes_past_the_budget_in_time() -> None:
    d = Drains()
    d.kube.add_deployment(NS, "web", 3, grace=20)
    d.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=3))  # allows nothing
    d.run(30)
    drain = d.start("i-00000000000000000", seconds=3000, reason="rebalance")
    d.run(60)
    assert not d.ends and d.kube.counters.stopped_by_delete == 0  # a rebalance drain honours the budget
    with d.kernel.installed():
        assert drain.tighten(d.kernel.now() + timedelta(seconds=120))
    d.run(130)
    result = d.result()
    assert result.status is CommandStatus.SUCCEEDED, result.message
    assert d.kube.counters.stopped_by_delete == 1 and d.kube.counters.killed_by_reclaim == 0


def test_a_timed_out_drain_gives_back_its_cordon_when_asked() -> None:
    d = Drains()
    d.kube.add_deployment(NS, "web", 3, grace=20)
    d.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=3))
    d.run(30)
    d.start("i-00000000000000001", seconds=60, uncordon_on_failure=True)
    d.run(61)
    result = d.result()
    assert result.status is CommandStatus.TIMED_OUT and result.uncordoned
    node = d.kube.node_view("n1")
    assert node is not None and not node.unschedulable and node.cordoned_by is None


def cordon_history(d: Drains, name: str) -> list[bool]:
    """``spec.unschedulable`` of the node ``name`` at each of its watch events, in order."""
    return [e.node.unschedulable for _, e in d.kube.node_log if e.node is not None and e.node.name == name]


def held_by_a_budget() -> Drains:
    """Drains under the honour policy, with a Deployment of 3 whose budget allows no disruption."""
    d = Drains()
    d.engine.pdb_deadline_policy = PdbDeadlinePolicy.HONOR
    d.kube.add_deployment(NS, "web", 3, grace=20)
    d.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=3))  # allows nothing
    d.run(30)
    return d


def test_a_drain_a_spot_warning_tightened_keeps_its_cordon_when_the_budget_holds_to_the_deadline() -> None:
    # REBALANCE_POLICY=replace: the run's drain pauses the run on failure (uncordon_on_failure); a Spot warning
    # tightens it; under the honour policy the budget holds every pod to the Spot deadline and the drain times out
    d = held_by_a_budget()
    drain = d.start("i-00000000000000000", seconds=3000, reason="rebalance-replace r1 step 0", uncordon_on_failure=True)
    d.run(10)
    with d.kernel.installed():
        assert drain.tighten(d.kernel.now() + timedelta(seconds=120))
    d.run(130)
    result = d.result()
    assert result.status is CommandStatus.TIMED_OUT and not result.uncordoned, result.message
    assert "left cordoned" in result.message
    history = cordon_history(d, "n0")
    assert history and history[history.index(True) :] == [True] * len(history[history.index(True) :])


def test_a_failed_refresh_drain_and_its_uncordon_leave_a_node_a_spot_drain_took_over() -> None:
    d = Drains()
    d.engine.pdb_deadline_policy = PdbDeadlinePolicy.HONOR
    d.kube.add_deployment(NS, "web", 3, grace=20)
    d.kube.add_budget(Budget(NS, "web", {"app": "web"}, min_available=3))
    d.run(30)
    d.start(
        "i-00000000000000001",
        seconds=60,
        reason="refresh r1 step 0",
        command_id="refresh-r1-0",
        uncordon_on_failure=True,
    )
    d.run(10)
    d.start("i-00000000000000001", seconds=120, reason="spot-interruption:terminate", command_id="spot-1")
    d.run(51)  # the refresh drain times out; the Spot drain goes on
    refresh = d.result(0)
    assert refresh.status is CommandStatus.TIMED_OUT and not refresh.uncordoned
    with d.kernel.installed():  # the refresher pauses the run and asks for the node back (lambdas.refresher give_up)
        uncordon = Command(
            command_id="refresh-r1-0-uncordon",
            cluster="demo",
            kind=CommandKind.UNCORDON,
            instance_id="i-00000000000000001",
            reason="refresh r1 step 0",
            deadline=d.kernel.now() + timedelta(seconds=120),
        )
        given_back = d.engine.run(uncordon)
    assert not given_back.uncordoned and "ending" in given_back.message
    history = cordon_history(d, "n1")
    assert history and history[history.index(True) :] == [True] * len(history[history.index(True) :])
    node = d.kube.node_view("n1")
    assert node is not None and node.unschedulable and node.annotations.get(ENDING_ANNOTATION) == "spot-1"


def test_a_pod_placed_on_the_node_after_its_cordon_is_evicted_with_the_others() -> None:
    # a scheduler whose view had not caught up with the cordon binds a pod there while the drain runs
    d = Drains()
    d.kube.add_deployment(NS, "web", 3, grace=20)
    d.run(30)
    d.start("i-00000000000000002", seconds=120)
    d.run(1)
    d.kube.add_pod(NS, "late", node="n2", owner=("ReplicaSet", "other"), grace=5)
    d.run(60)
    result = d.result()
    assert result.status is CommandStatus.SUCCEEDED, result.message
    assert d.kube.pod(NS, "late") is None
    late = next(p for p in result.pods if p.name == "late")
    assert late.action is PodAction.EVICT and "after the cordon" in late.reason


def test_a_refresh_drain_a_spot_warning_tightened_marks_its_cordon_ending_and_no_uncordon_undoes_it() -> None:
    # the Spot warning took the refresh drain over (one drain): its cordon is marked ending, so the refresher's
    # uncordon after the drain failed (give_up) leaves the doomed node cordoned
    d = held_by_a_budget()
    reason = "refresh r1 step 0"
    drain = d.start("i-00000000000000001", 600, reason, "refresh-r1-0", uncordon_on_failure=True)
    d.run(10)
    node = d.kube.node_view("n1")
    assert node is not None and node.annotations.get(ENDING_ANNOTATION) is None  # a refresh drain: not ending
    with d.kernel.installed():
        spot_deadline = d.kernel.now() + timedelta(seconds=110)
        assert drain.tighten(spot_deadline)
        assert not drain.tighten(spot_deadline)  # the same deadline again (the next heartbeat): nothing more
    node = d.kube.node_view("n1")
    assert node is not None and node.annotations.get(ENDING_ANNOTATION) == "refresh-r1-0"
    d.run(120)
    assert d.result().status is CommandStatus.TIMED_OUT and not d.result().uncordoned
    with d.kernel.installed():
        uncordon = Command(
            command_id="refresh-r1-0-uncordon",
            cluster="demo",
            kind=CommandKind.UNCORDON,
            instance_id="i-00000000000000001",
            reason=reason,
            deadline=d.kernel.now() + timedelta(seconds=120),
        )
        given_back = d.engine.run(uncordon)
    assert not given_back.uncordoned and "ending" in given_back.message
    node = d.kube.node_view("n1")
    assert node is not None and node.unschedulable


def test_a_drain_started_already_tightened_is_made_ending_at_the_first_heartbeat() -> None:
    # the Spot warning came while the refresh drain was queued: it starts with the Spot deadline
    # (agent.consumer.decisions.tightened), and the heartbeat hands the same deadline to it
    d = Drains()
    d.kube.add_deployment(NS, "web", 3, grace=20)
    d.run(30)
    drain = d.start("i-00000000000000002", 110, "refresh r1 step 0", "refresh-r1-1")
    with d.kernel.installed():
        assert drain.tighten(d.kernel.now() + timedelta(seconds=110))
    node = d.kube.node_view("n2")
    assert node is not None and node.annotations.get(ENDING_ANNOTATION) == "refresh-r1-1"
