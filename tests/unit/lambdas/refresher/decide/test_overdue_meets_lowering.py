"""A step's lowering counted by another step's ``lowering_target`` in the same pass, then found past its
``give_back`` deadline (``undo.give_back_overdue``: its unit left raised, ``original_desired`` + 1). Steps go in
``index`` order: the step before it asks two units less (its own and the overdue step's lowering, ``lowerings_asked``),
then the overdue step ends ``failed`` keeping its unit, and the pass sent the lower value. Desired capacity
then drops by the unit the run records as left raised (``unreturned``): the summary tells the operator a unit is
above the group's own size that is not there (lowered by that count, the group goes below its real size), and the
other step's read-back counts the missing unit as its own. A lowering now counts only the asks of steps within
their ``give_back`` deadline (``lowering_target``). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import RunStatus, StepState, WaitDeadline
from lambdas.refresher.decide import advance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, T0, caps, two_undoing, world

PAUSING = "run pausing: surge given back"
LATE = T0 + timedelta(hours=1)  # past the give_back deadline of the step whose lowering started at T0


def test_a_lowering_counted_by_another_step_is_not_sent_once_its_step_left_its_unit_raised() -> None:
    r = two_undoing(
        {"note": PAUSING},
        {
            "note": f"{PAUSING}; nothing launched; desired lowered to 3",  # asked in an earlier pass, refused since
            "waiting_since": {WaitDeadline.GIVE_BACK.value: T0},
        },
    )
    d = advance(r, world([OLD, OTHER], 4), SETTINGS, LATE)
    g = d.run.groups[0]
    assert d.run.steps[1].state is StepState.FAILED and g.unreturned == 1  # its unit left raised: od 3, raised 1
    # the other step gives back its own unit only: desired capacity at least od + raised - 1 = 3
    assert all(desired is None or desired >= g.original_desired + g.raised - 1 for _, desired, _ in caps(d)), caps(d)
    # read back next pass: the other step's unit given back, the overdue one's left raised as recorded
    after = advance(d.run, world([OLD, OTHER], 3), SETTINGS, LATE + timedelta(seconds=120))
    assert after.run.steps[0].state is StepState.UNDONE and after.run.status is RunStatus.FAILED
    assert (after.run.groups[0].original_desired, after.run.groups[0].raised) == (3, 0)
