"""A unit left raised past its ``give_back`` deadline (``undo.give_back_overdue``: the group counts it as its own,
``original_desired`` + 1) meets the MaxSize restore of the group's end (``lifecycle.finish_groups``). When the run had
to raise MaxSize for that unit, restoring the original MaxSize below the desired capacity left raised makes Auto
Scaling lower desired capacity to it (UpdateAutoScalingGroup without DesiredCapacity clamps it) and terminate an
instance of its choosing, undrained: the unit "left raised" is taken back by a termination nobody drained. MaxSize
is left at the desired capacity the run left raised (recorded, ``max_left``). Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.runs import RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SetCapacity
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, caps, run, sized, world

FIRST = T0 + timedelta(seconds=60)
LATE = FIRST + timedelta(hours=1)


def test_max_size_is_not_restored_below_a_unit_left_raised() -> None:
    cid = "refresh-r1-0-undo"
    r = run(StepState.UNDO_TERMINATING, 1, T0, surge_instance_id=SPARE, undo_command_id=cid, note="drain failed")
    r.groups[0].original_max = 2  # the group was full: the surge raised MaxSize to 3
    r.groups[0].max_raised_to = 3
    drained = {"status": "succeeded", "result": {"message": ""}, "command": {"deadline": T0.isoformat()}}
    w = replace(sized(world([OLD, OTHER, SPARE], 3), max_size=3), commands={cid: drained})
    first = advance(r, w, SETTINGS, FIRST)  # the terminate with decrement is refused for good (AccessDenied)
    late = advance(first.run, w, SETTINGS, LATE)
    assert late.run.steps[0].state is StepState.FAILED and late.run.groups[0].unreturned == 1
    # desired capacity 3 is left raised: a MaxSize of 2 would clamp it and terminate an instance undrained
    assert all(a.max_size is None or a.max_size >= 3 for a in late.actions if isinstance(a, SetCapacity)), caps(late)
    assert late.run.status is RunStatus.FAILED and late.run.groups[0].max_left == 3
    assert "MaxSize 3" in late.run.reason


def test_a_unit_min_size_absorbed_still_ends_the_run_succeeded() -> None:
    """kOps raised MinSize under the surge (``absorb``: ``original_desired`` + 1, no unit left raised): MinSize holds
    MaxSize up, nothing is recorded left raised, the run succeeds (as before)."""
    r = run(StepState.DONE, 0, T0, surge_instance_id=SPARE)
    r.groups[0].original_max, r.groups[0].original_desired, r.groups[0].max_raised_to = 2, 3, 3
    w = sized(world([OTHER, SPARE, OLD], 3), min_size=3, max_size=3)
    done = advance(r, w, SETTINGS, FIRST)
    assert done.run.status is RunStatus.SUCCEEDED and done.run.groups[0].max_left is None, done.run.reason
    assert not caps(done)
