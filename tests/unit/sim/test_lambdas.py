"""sim.lambdas: the interruption Lambda's real ``handle()`` on the simulated AWS account and simulated time, reached
through the simulated EventBridge; a crash at a port call ends the invocation there and its retry completes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.schema import agent_partition_of
from sim.aws import SimAws
from sim.cloud import TerminationHook
from sim.dynamo import MemoryDynamo
from sim.eventbridge import Delivery, EventBus, stack_rules
from sim.faults import Faults
from sim.kernel import Kernel
from sim.lambdas import TABLE, Frame, Invocation, LambdaCrash, Lambdas, Tripwire, _Wired

CLUSTER = "sim.k8s.local"


class Slice:
    """A kernel, the simulated account with one Spot group of 3, the state table, the Lambdas behind the bus."""

    def __init__(self) -> None:
        self.kernel = Kernel(7)
        self.faults = Faults(self.kernel)
        table = MemoryDynamo(self.kernel, self.faults).table(TABLE)
        self.results: list[Invocation] = []
        self.bus = EventBus(self.kernel, self.invoke, stack_rules(CLUSTER), Delivery(duplicate=0.0))
        self.aws = SimAws(self.kernel, self.faults, self.bus.put)
        self.aws.cloud.add_group(
            "nodes-us-east-1a",
            cluster=CLUSTER,
            instance_group="nodes-us-east-1a",
            zones=("us-east-1a",),
            min_size=3,
            max_size=3,
            desired=3,
            hooks=(TerminationHook("node-manager-drain"),),
        )
        self.aws.start()
        self.lambdas = Lambdas(self.kernel, table, self.aws, CLUSTER)
        self.table = table

    def invoke(
        self,
        function: str,
        event: dict[str, Any],
        crash_at: int = 0,
        kind: str = "crash",
        interleave_at: int = 0,
        interleave: Callable[[], None] | None = None,
    ) -> Invocation:
        result = self.lambdas.invoke(function, event, crash_at, kind, interleave_at, interleave)
        self.results.append(result)
        return result

    def commands(self) -> list[dict[str, Any]]:
        items = self.table.items(agent_partition_of(CLUSTER))
        return [i for i in items if str(i["sk"]).startswith("CMD#")]


@pytest.fixture
def world() -> Slice:
    return Slice()


def test_a_spot_warning_becomes_a_recorded_drain_command_on_the_queue(world: Slice) -> None:
    instance = sorted(world.aws.cloud.instances)[0]
    assert world.aws.interrupt(instance)
    world.kernel.run(10)
    interruption = [r for r in world.results if r.function == "interruption"]
    assert interruption and interruption[0].status == "ok", interruption
    assert interruption[0].response is not None and interruption[0].response["status"] == "acted"
    commands = world.commands()
    assert [(c["kind"], c["instance_id"]) for c in commands] == [("drain", instance)]
    assert world.aws.queue.sent == 1
    # the invocation ran on simulated time: the command's deadline is the warning's two minutes after the epoch
    assert str(commands[0]["command"]["deadline"]).startswith("2026-01-05T00:02")


def test_a_crash_mid_invocation_stops_there_and_the_retry_completes(world: Slice) -> None:
    world.bus.crash(0, 30, "interruption", 4, "crash")
    instance = sorted(world.aws.cloud.instances)[0]
    world.aws.interrupt(instance)
    world.kernel.run(10)
    first = [r for r in world.results if r.function == "interruption"]
    assert [r.status for r in first] == ["crash"] and first[0].calls == 4
    world.kernel.run(100)
    statuses = [r.status for r in world.results if r.function == "interruption"]
    assert statuses == ["crash", "ok"]
    assert [c["kind"] for c in world.commands()] == ["drain"]
    assert world.aws.queue.sent >= 1


def test_throttled_auto_scaling_is_a_function_error_retried(world: Slice) -> None:
    from sim.faults import FaultWindow

    world.faults.add(FaultWindow("autoscaling", "", 0, 30, "Throttling"))
    world.aws.interrupt(sorted(world.aws.cloud.instances)[0])
    world.kernel.run(100)
    statuses = [r.status for r in world.results if r.function == "interruption"]
    assert statuses[0] == "error" and statuses[-1] == "ok"
    assert world.bus.stats.retried >= 1


def test_a_duplicate_run_concurrently_records_one_command(world: Slice) -> None:
    """The same warning delivered twice at once: the second invocation runs whole between two port calls of the
    first; the CMD# record's conditional write keeps one command."""
    world.bus.overlap(0, 100, "interruption", 3, "interruption")
    instance = sorted(world.aws.cloud.instances)[0]
    world.aws.interrupt(instance)
    world.kernel.run(10)
    statuses = [(r.function, r.status) for r in world.results]
    assert statuses == [("interruption", "ok"), ("interruption", "ok")]
    assert world.bus.stats.overlapped == 1
    assert [(c["kind"], c["instance_id"]) for c in world.commands()] == [("drain", instance)]


def test_a_wired_call_passes_the_tripwire_each_time_and_calls_the_targets_method_as_it_is_now() -> None:
    class Target:
        name = "t"

        def put(self, x: int) -> int:
            return x

    seen: list[tuple[str, tuple[Any, ...]]] = []
    wire = Tripwire(observers=[lambda function, call, args, kwargs: seen.append((call, args))])
    target = Target()
    wired: Any = _Wired(target, "dynamodb", wire)
    assert wired.put(1) == 1 and wired.put(2) == 2 and wired.name == "t"
    target.put = lambda x: -x  # type: ignore[method-assign]  # replaced after the wrapper was made (a counting test's)
    assert wired.put(3) == -3
    assert seen == [("dynamodb.put", (1,)), ("dynamodb.put", (2,)), ("dynamodb.put", (3,))]
    wire.frames.append(Frame("replenisher", at=1))
    with pytest.raises(LambdaCrash):
        wired.put(4)


def test_the_refresher_runs_in_warm_environments_and_starts_cold_after_a_crash(world: Slice) -> None:
    # Lambda's execution environments (sim.lambdas, "Execution environments"): a warm one runs the next invocation
    # with what it kept; a concurrent invocation runs in another one; a crash resets its own
    tick = {"trigger": "tick"}
    first = world.lambdas.refresher
    assert world.invoke("refresher", tick).status == "ok"
    assert world.lambdas.idle["refresher"] == [first] and world.lambdas.cold_starts == {}
    inner: list[Any] = []

    def concurrent() -> None:
        inner.append(world.lambdas.idle["refresher"][:])
        world.invoke("refresher", tick)

    assert world.invoke("refresher", tick, interleave_at=1, interleave=concurrent).status == "ok"
    assert inner == [[]] and world.lambdas.cold_starts == {"refresher": 1}  # the first one was busy: a second one, cold
    warm = world.lambdas.idle["refresher"][:]
    assert len(warm) == 2 and first in warm
    assert world.invoke("refresher", tick, crash_at=1).status == "crash"
    assert world.lambdas.idle["refresher"] == warm[:1]  # the last idle one ran it and was reset
    assert world.invoke("refresher", tick).status == "ok" and world.lambdas.cold_starts == {"refresher": 1}
    world.lambdas.idle["refresher"].clear()  # every warm one busy or gone: the next starts cold, with empty memos
    assert world.invoke("refresher", tick).status == "ok" and world.lambdas.cold_starts == {"refresher": 2}
    made = world.lambdas.idle["refresher"][-1]
    assert made not in warm and made.gather_memo is not first.gather_memo and made.memo is not first.memo


def test_a_replenisher_started_cold_after_a_crash_checks_the_termination_hooks_again(world: Slice) -> None:
    # the replenisher's environment keeps the groups whose termination hook it found right (``Deps.hooks_seen``): a
    # warm one does not ask again; a crash resets the environment, and the next one (cold) asks again
    tick = world.bus._tick("replenisher")
    calls = world.aws.autoscaling.calls
    hook_calls: list[int] = []
    world.lambdas.on_invocation.append(lambda *_: hook_calls.append(calls.get("DescribeLifecycleHooks", 0)))
    first = world.lambdas.replenisher
    assert world.invoke("replenisher", tick).status == "ok" and first.hooks_seen
    assert world.invoke("replenisher", tick).status == "ok"
    assert world.lambdas.idle["replenisher"] == [first] and world.lambdas.cold_starts == {}
    assert world.invoke("replenisher", tick, crash_at=1).status == "crash"
    assert world.lambdas.idle["replenisher"] == []  # reset with the crash
    assert world.invoke("replenisher", tick).status == "ok"
    assert world.lambdas.cold_starts == {"replenisher": 1}
    cold = world.lambdas.idle["replenisher"][0]
    assert cold is not first and cold.hooks_seen and cold.memo is not first.memo
    # DescribeLifecycleHooks: asked by the first, not by the warm second, asked again by the cold one after the crash
    assert hook_calls[0] > 0 and hook_calls[1] == hook_calls[0] and hook_calls[3] > hook_calls[2]
