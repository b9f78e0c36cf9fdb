"""kOps resets a surged group's sizes while a step's old instance is drained and its termination with decrement is
still to be made (the first call refused: ``ScalingActivityInProgress``, throttled; or the drain just ended): Auto
Scaling clamped desired capacity back to the group's own size and removed an instance of its choosing, so the
surge unit is already gone. A termination with decrement now would remove a second instance and leave the group one
below the size kOps set (docs/DESIGN.md invariant 4): the old instance goes without decrement, as at MinSize, and
the unit counts as given back once it left. Pure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.runs import RunStatus, RunStep, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import TerminateInstance
from tests.unit.lambdas.refresher.decide_world import (
    DRAINED,
    NODES,
    OLD,
    OTHER,
    SETTINGS,
    SPARE,
    T0,
    caps,
    effects,
    run,
    sized,
    world,
)

LATER = T0 + timedelta(seconds=60)
CMD = "refresh-r1-0"
THIRD = "i-00000000000000004"


@pytest.mark.parametrize("removed", [OTHER, SPARE])
def test_a_termination_retried_after_a_clamp_removes_no_second_instance(removed: str) -> None:
    # surged 2 -> 3; the old instance drained, its terminate refused; kOps set MaxSize 2 back: desired clamped to 2,
    # Auto Scaling removed ``removed``. The old instance goes without decrement (Auto Scaling replaces it)
    left = [i for i in (OLD, OTHER, SPARE) if i != removed]
    r = run(StepState.TERMINATING, 1, T0, surge_instance_id=SPARE, command_id=CMD)
    decision = advance(r, sized(world(left, 2), max_size=2, **{CMD: DRAINED}), SETTINGS, LATER)
    assert [(t.instance_id, t.decrement) for t in effects(decision, TerminateInstance)] == [(OLD, False)]
    assert not caps(decision) and decision.run.groups[0].raised == 1
    # it left, Auto Scaling launched its replacement (desired kept at 2): the unit counts as given back, once
    after = [i for i in left if i != OLD] + [THIRD]
    done = advance(decision.run, sized(world(after, 2), max_size=2), SETTINGS, LATER + timedelta(seconds=60))
    assert not caps(done) and not effects(done, TerminateInstance)
    assert done.run.steps[0].state is StepState.DONE and done.run.groups[0].raised == 0
    assert done.run.status is RunStatus.SUCCEEDED


def test_a_drain_ending_after_a_clamp_not_yet_applied_terminates_nothing_with_decrement() -> None:
    # desired capacity already clamped to 2, Auto Scaling has not removed an instance yet: three are live and Ready
    r = run(StepState.DRAINING, 1, T0, surge_instance_id=SPARE, command_id=CMD)
    decision = advance(r, sized(world([OLD, OTHER, SPARE], 2), max_size=2, **{CMD: DRAINED}), SETTINGS, LATER)
    assert [(t.instance_id, t.decrement) for t in effects(decision, TerminateInstance)] == [(OLD, False)]
    done = advance(decision.run, sized(world([OTHER, SPARE], 2), max_size=2), SETTINGS, LATER + timedelta(seconds=60))
    assert done.run.steps[0].state is StepState.DONE and done.run.groups[0].raised == 0 and not caps(done)


def test_two_steps_terminating_the_first_decremented_the_second_still_holds_its_unit() -> None:
    # surged 2 -> 4 (two steps): step 1's old instance left with its decrement (desired 3), step 0's terminate was
    # refused. Step 0, judged first, must not take step 1's decrement for a clamp: its unit is still in desired 3
    r = run(StepState.TERMINATING, 2, T0, surge_instance_id=SPARE, command_id=CMD)
    second = r.steps[0].model_copy(
        update={"index": 1, "instance_id": OTHER, "surge_instance_id": THIRD, "command_id": "refresh-r1-1"}
    )
    r = r.model_copy(update={"steps": [r.steps[0], second]})
    w = sized(world([OLD, SPARE, THIRD], 3), **{CMD: DRAINED, "refresh-r1-1": DRAINED})
    decision = advance(r, w, SETTINGS, LATER)
    assert [(t.instance_id, t.decrement) for t in effects(decision, TerminateInstance)] == [(OLD, True)]
    assert decision.run.status is RunStatus.RUNNING
    assert [s.state for s in decision.run.steps] == [StepState.TERMINATING, StepState.DONE]
    assert decision.run.groups[0].raised == 1 and NODES


def test_a_raise_of_another_step_not_visible_yet_is_redone_not_taken_for_a_clamp() -> None:
    # surged 2 -> 4 (two steps); step 1's raise is not visible (lost, or kOps clamped it: desired 3). Step 1, surging,
    # raises desired to what the run holds again, so step 0's unit is in the group's size: its drained old instance
    # goes with its decrement, as before
    r = run(StepState.DRAINING, 2, T0, surge_instance_id=SPARE, command_id=CMD)
    second = RunStep(index=1, group=NODES, role="node", instance_id=OTHER, state=StepState.SURGING, intent_at=T0)
    second.surge_baseline = [OLD, OTHER, SPARE]
    r = r.model_copy(update={"steps": [r.steps[0], second]})
    w = sized(world([OLD, OTHER, SPARE], 3), **{CMD: DRAINED})
    decision = advance(r, w, SETTINGS, LATER)
    assert [(t.instance_id, t.decrement) for t in effects(decision, TerminateInstance)] == [(OLD, True)]
    assert caps(decision) == [(NODES, 4, None)]  # step 1's raise redone
    assert decision.run.status is RunStatus.RUNNING
