"""A MinSize kOps raised over a run's surge unit and lowered again before the step ended (``worker.track_floor``):
the unit became the group's own when Auto Scaling raised desired capacity to that MinSize, and a later MaxSize
lowering clamps it no lower than that MaxSize. The run remembers the floor it read (``GroupSurge.min_size``), so its
terminate goes without decrement, the unit is absorbed, and the group's MaxSize is not restored below its own size
(resize seed 340200: before, the unit was given back with a decrement and MaxSize restored to the original, the group
one below the size kOps' two writes made). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import Run, RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import TerminateInstance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, caps, effects, run, sized, world

NEW = "i-00000000000000009"


def terminating() -> Run:
    """A run of one group (own size 2, MaxSize 2 raised to 3 for the surge unit) whose step terminates ``OLD``."""
    r = run(StepState.TERMINATING, 1, T0, surge_instance_id=SPARE)
    r.groups[0].original_max, r.groups[0].max_raised_to = 2, 3
    return r


def test_a_min_size_read_over_the_unit_is_remembered_and_the_terminate_keeps_the_unit() -> None:
    grown = sized(world([OLD, OTHER, SPARE, NEW], 4), min_size=4, max_size=5)  # kOps: MinSize 4, MaxSize 5
    first = advance(terminating(), grown, SETTINGS, T0 + timedelta(minutes=5))
    assert first.run.groups[0].min_size == 4
    assert [a.decrement for a in effects(first, TerminateInstance)] == [False]
    # kOps again, before the step ended: MinSize 1, MaxSize 3 (Auto Scaling clamped desired capacity 4 -> 3)
    shrunk = sized(world([OLD, OTHER, SPARE], 3), min_size=1, max_size=3)
    second = advance(first.run, shrunk, SETTINGS, T0 + timedelta(minutes=10))
    assert second.run.groups[0].min_size == 3  # the group's own size: at least 3 (MaxSize clamped the floor)
    assert [a.decrement for a in effects(second, TerminateInstance)] == [False]  # before: decrement, to 2
    # the old instance left; Auto Scaling replaced it (desired capacity kept at 3)
    gone = sized(world([OTHER, SPARE, NEW], 3), min_size=1, max_size=3)
    done = advance(second.run, gone, SETTINGS, T0 + timedelta(minutes=15))
    assert done.run.steps[0].state is StepState.DONE and "own" in done.run.steps[0].note
    assert done.run.groups[0].original_desired == 3 and done.run.groups[0].raised == 0
    assert all(max_size is None or max_size >= 3 for _, _, max_size in caps(done)), caps(done)  # not back to 2
    assert all(desired is None for _, desired, _ in caps(done))
    assert done.run.status is RunStatus.SUCCEEDED and done.run.groups[0].max_left is None


def test_without_a_min_size_change_the_unit_is_given_back_with_a_decrement() -> None:
    same = sized(world([OLD, OTHER, SPARE], 3), max_size=3)
    decision = advance(terminating(), same, SETTINGS, T0 + timedelta(minutes=5))
    assert decision.run.groups[0].min_size == 1
    assert [a.decrement for a in effects(decision, TerminateInstance)] == [True]
