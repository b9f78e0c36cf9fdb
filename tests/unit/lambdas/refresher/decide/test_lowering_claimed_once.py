"""A lowering asked by one step (``undo.lower``: a surge that launched nothing) is read back by the next pass, which
counts it given back (d635263). With two steps of the group giving units back, the other one, judged first
(``index`` order), read the same lower desired capacity as its own unit taken back (``undo.taken_back``): it ended
with its spare kept, and the step that asked the lowering found desired capacity above its new target with nothing
to give back, waiting for a launch that never comes (no deadline), the group one above its own size (docs/DESIGN.md
invariants 4 and 8). The read-back is the lowering step's. Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
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


def test_a_lowering_read_back_is_the_unit_of_the_step_that_asked_it() -> None:
    # orig 2, surged to 4: step 0 (OLD) has spare SPARE and gives it back (the run pauses); step 1 (OTHER) launched
    # nothing, asked desired 3 (2 + 2 - 1), now read back
    r = two_undoing(
        {"surge_instance_id": SPARE, "note": "run pausing: surge given back"},
        {
            "surge_baseline": [OLD, OTHER, SPARE],
            "note": "spare_launch deadline passed: surge given back; nothing launched; desired lowered to 3",
        },
    )
    decision = advance(r, world([OLD, OTHER, SPARE], 3), SETTINGS, LATER)
    assert decision.run.steps[1].state is StepState.UNDONE
    assert decision.run.groups[0].raised == 1
    # step 0's unit is still in desired capacity 3: its spare is drained to be given back, not kept
    assert decision.run.steps[0].state is StepState.UNDO_DRAINING
    assert [c.command.instance_id for c in effects(decision, SendCommand)] == [SPARE]
    assert not effects(decision, TerminateInstance)
