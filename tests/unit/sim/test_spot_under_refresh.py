"""A Spot warning that hits a node while a refresh run drains it (the simulation runs the real Lambdas and agent):
the warning takes the refresh drain over (tightened to the Spot deadline: one drain, no second one queued), no early
detach launches a second replacement beside the run's spare, the reclaim ends the step with its spare kept, and the
invariants hold to the end (sizes back where they were: invariant 4)."""

from __future__ import annotations

from typing import Any

import pytest

from core.runs import Run, RunStatus, StepState
from sim.faults import FaultWindow
from sim.kube_objects import Budget
from sim.run import run_seed
from sim.world import World
from tests.unit.sim.fault_entry import entry

# a manual refresh of the 1a workers (all of them), 10 simulated minutes in; nothing else goes wrong
SCHEDULE = (entry(600, "manual_refresh", az="us-east-1a"),)


def refresh_drain(item: dict[str, Any]) -> bool:
    """A refresh run's drain of an old node (not the drain of a spare given back), still queued or running."""
    command = item.get("command") or {}
    return (
        item.get("kind") == "drain"
        and item.get("status") in ("queued", "running")
        and str(command.get("reason", "")).startswith("refresh ")
        and not str(command.get("command_id", "")).endswith("-undo")
    )


def block_the_drain(world: World, instance_id: str) -> None:
    """The reclaim comes before the run's termination: a PodDisruptionBudget allowing no disruption over a
    Deployment with a pod on the instance's node (as the schedules' ``pdb_block`` does, aimed; lifted just after the
    reclaim, so no later step is held by it) keeps the drain going to the Spot deadline, and Auto Scaling refuses the
    termination until after the reclaim."""
    node = world.kube.instances.get(instance_id)
    owners = sorted({world.kube.pods[key].owner for key in world.kube.by_node.get(node or "", {})})
    deployment = next((o.removeprefix("deploy:") for o in owners if o.startswith("deploy:")), None)
    assert deployment is not None, f"no Deployment pod on {node}"
    namespace, name = deployment.split("/")
    app = world.kube.deployments[deployment].labels
    world.kube.add_budget(Budget(namespace, f"{name}-blocker", app, min_available="100%"))

    def lift() -> None:
        world.kube.budgets[f"{namespace}/{name}-blocker"] = Budget(
            namespace, f"{name}-blocker", app, max_unavailable="100%"
        )

    world.kernel.after(150, "test: pdb unblock", lift)
    # and Auto Scaling refuses TerminateInstanceInAutoScalingGroup until after the reclaim (ScalingActivityInProgress,
    # as the schedules' API windows draw it): the run's termination with decrement cannot beat Spot to the instance
    t = world.kernel.t
    refused = "ScalingActivityInProgress"
    world.add_fault_window(FaultWindow("autoscaling", "TerminateInstanceInAutoScalingGroup", t, t + 180, refused))


@pytest.mark.parametrize("blocked", [False, True], ids=["drain-ends-first", "reclaimed-under-the-drain"])
def test_a_spot_warning_during_a_refresh_drain_takes_it_over_and_sizes_end_where_they_were(blocked: bool) -> None:
    hit: list[str] = []
    worlds: list[World] = []

    def spot_under_the_drain(world: World) -> None:
        worlds.append(world)

        def look() -> None:
            if hit:
                return
            drain = next((i for i in world.view.table_prefix("CMD#") if refresh_drain(i)), None)
            if drain is None:
                return
            victim = str(drain["instance_id"])
            if blocked:
                block_the_drain(world, victim)
            if world.aws.interrupt(victim):
                hit.append(victim)

        world.kernel.every(2, "test:spot-under-refresh-drain", look)

    result = run_seed(4, nodes=9, days=0.25, schedule=SCHEDULE, mutate=spot_under_the_drain, trace=True)

    assert hit, "no refresh drain was seen: the schedule no longer shows the case"
    assert result.violation is None, result.summary()
    (world,) = worlds
    (victim,) = hit
    drains = [i for i in world.view.table_prefix("CMD#") if i.get("instance_id") == victim and i.get("kind") == "drain"]
    assert [str(i["sk"]).split("-")[0] for i in drains] == ["CMD#refresh"], drains  # one drain, no spot-... drain
    assert drains[0].get("deadline_tightened_to"), drains[0]  # taken over by the Spot warning
    assert not world.view.table_prefix(f"DETACH#{victim}")  # no early replacement beside the run's spare
    (item,) = world.view.table_prefix("RUN#")
    run = Run.model_validate(item)  # finished steps are stored as compact rows (core.runrecord)
    assert run.status is RunStatus.SUCCEEDED, run.reason
    (step,) = [s for s in run.steps if s.instance_id == victim]
    assert step.state is StepState.DONE, step
    if blocked:  # the drain did not end before the reclaim: the step saw its instance leave without its decrement
        assert "reclaimed" in step.note, step
