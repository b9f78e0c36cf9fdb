"""A MaxSize restore at a run's end that MinSize holds up: kOps (or a person) set the group's MinSize above the MaxSize
the run found, and its MaxSize within what the run raised it to (an instance group grown from 2 to 3 nodes while the
surge had it at 3). The restore is asked, the executor clamps MaxSize to MinSize (Auto Scaling refuses a MaxSize
below it), MaxSize reads back unchanged: before, the run asked again every pass and never ended (invariant 8),
protecting the group from every other operation (``Run.busy_groups``). A MaxSize MinSize holds above the original is
kOps' own, not fought. Pure."""

from __future__ import annotations

from datetime import timedelta

from core.capacity import clamp
from core.runs import RunStatus, StepState
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.decide import advance
from tests.unit.lambdas.refresher.decide_world import NODES, OTHER, SETTINGS, SPARE, T0, caps, run, sized, world


def test_a_max_size_restore_min_size_holds_up_ends_the_run() -> None:
    r = run(StepState.DONE, 0, T0, surge_instance_id=SPARE)
    r.groups[0].original_max, r.groups[0].max_raised_to = 2, 3
    w = sized(world([OTHER, SPARE, "i-00000000000000009"], 3), min_size=3, max_size=3)
    decision = advance(r, w, SETTINGS, T0 + timedelta(minutes=5))
    for asked in caps(decision):  # whatever is asked, Auto Scaling would keep MaxSize 3
        assert clamp(None, asked[2], capacity_bounds(decision.run, w, SETTINGS)[NODES]).max_size == 3
    assert decision.run.status is RunStatus.SUCCEEDED, decision.run.waiting
