"""Two steps of a group giving back surge units that launched nothing in the same pass (``undo.lower``; a run with
``max_surge`` 2 paused while an outage kept its group from launching: storm seed 150118). Each asked desired
capacity ``original_desired + raised - 1``, the same value, so together they lowered it by one unit, not two; the
next pass read that value back as the other step's lowering (``undo.lowered_by_another``) for each of them, and
both waited for good (no deadline), the group one above its own size (docs/DESIGN.md invariants 4 and 8). Each
lowering now counts the other steps' lowerings not yet read back, and a value read back is each asking step's whose
ask it reaches, as many as the units it lacks. Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import TerminateInstance
from tests.unit.lambdas.refresher.decide_world import (
    NODES,
    OLD,
    OTHER,
    SETTINGS,
    T0,
    caps,
    effects,
    two_undoing,
    world,
)

LATER = T0 + timedelta(seconds=60)
NEXT = LATER + timedelta(seconds=300)
PAUSING = "run pausing: surge given back"


def _two_surges_that_launched_nothing(note: str = PAUSING, other_note: str = PAUSING):  # type: ignore[no-untyped-def]
    return two_undoing({"note": note}, {"note": other_note})


def test_two_lowerings_in_one_pass_lower_by_two_units_and_are_both_read_back() -> None:
    # orig 2, surged to 4 for two steps; nothing launched: both give their unit back by lowering desired capacity
    first = advance(_two_surges_that_launched_nothing(), world([OLD, OTHER], 4), SETTINGS, LATER)
    assert caps(first)[-1] == (NODES, 2, None)
    assert [s.state for s in first.run.steps] == [StepState.UNDOING, StepState.UNDOING]
    assert first.run.groups[0].raised == 2  # counted only once read back
    second = advance(first.run, world([OLD, OTHER], 2), SETTINGS, NEXT)
    assert [s.state for s in second.run.steps] == [StepState.UNDONE, StepState.UNDONE]
    assert second.run.groups[0].raised == 0
    assert not effects(second, TerminateInstance)


def test_a_value_asked_by_both_and_read_back_is_both_steps_units() -> None:
    # both steps asked 2 in an earlier pass (each counting the other's ask): read back, both units are given back
    note = f"{PAUSING}; nothing launched; desired lowered to 2"
    decision = advance(_two_surges_that_launched_nothing(note, note), world([OLD, OTHER], 2), SETTINGS, NEXT)
    assert [s.state for s in decision.run.steps] == [StepState.UNDONE, StepState.UNDONE]
    assert decision.run.groups[0].raised == 0


def test_only_one_of_two_lowerings_read_back_leaves_the_other_asking() -> None:
    # the first step asked 3, the second 2; only 3 read back (the second ask not made yet): the first step's unit
    first_note = f"{PAUSING}; nothing launched; desired lowered to 3"
    other_note = f"{PAUSING}; nothing launched; desired lowered to 2"
    r = _two_surges_that_launched_nothing(first_note, other_note)
    decision = advance(r, world([OLD, OTHER], 3), SETTINGS, NEXT)
    assert [s.state for s in decision.run.steps] == [StepState.UNDONE, StepState.UNDOING]
    assert decision.run.groups[0].raised == 1
    assert caps(decision)[-1] == (NODES, 2, None)
