"""kOps' MaxSize clamps a paused run's two surge units to one (storm seed 152378): one step's spare runs, the other
step's unit was never launched (an outage: Auto Scaling's replacement it was handed never came). The clamp to the
live instances took the unlaunched unit; ``undo.taken_back`` judged the first step first and counted the clamp as
its own unit gone, keeping its spare, and the other step, holding the last unit with nothing launched, waited for a
launch that never comes (desired capacity equals the live instances), the group one above its size for good
(invariants 4 and 8). A unit no live instance backs is the one a clamp takes first. Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand
from tests.unit.lambdas.refresher.decide_world import (
    OLD,
    OTHER,
    SETTINGS,
    SPARE,
    T0,
    effects,
    two_undoing,
    world,
)

LATER = T0 + timedelta(seconds=60)
PAUSING = "run pausing: surge given back"


def test_a_clamp_takes_the_unit_no_instance_backs() -> None:
    # orig 2, two units (desired 4): step 0's spare SPARE runs; step 1's unit never launched; kOps clamped to 3
    r = two_undoing(
        {"surge_instance_id": SPARE, "note": PAUSING}, {"surge_baseline": [OLD, OTHER, SPARE], "note": PAUSING}
    )
    decision = advance(r, world([OLD, OTHER, SPARE], 3), SETTINGS, LATER)
    assert decision.run.steps[1].state is StepState.UNDONE  # its unit is the one the clamp took
    assert decision.run.groups[0].raised == 1
    # step 0's unit is still in desired capacity 3: its spare is drained to be given back, not kept
    assert decision.run.steps[0].state is StepState.UNDO_DRAINING
    assert [c.command.instance_id for c in effects(decision, SendCommand)] == [SPARE]
