"""Two steps of a group giving their surge units back at once, neither with a spare of its own recorded (both were
surging when the run was cancelled: a spare is recorded only once it is Ready and the old node drains). The first
step's spare launched before the second step surged (inside the second's ``surge_baseline``); the second's launched
after (outside both). The first step took the second's spare (it has no node yet, which ``undoing`` prefers:
nothing to drain), so the second found none, waited for Auto Scaling to launch one that never comes (desired
capacity equals the live instances), and left its unit raised at its ``give_back`` deadline: the group one above its
own size (storm seed 178000, 300 nodes x 3 days, with node health faults). A spare only this step can claim is taken
first now. Pure."""

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

LATE = "i-00000000000000004"  # the second step's spare: launched after its surge, no node yet
CANCELLING = "run cancelling: surge given back"


def test_each_step_gives_back_the_spare_only_it_can_claim() -> None:
    run = two_undoing({"note": CANCELLING}, {"note": CANCELLING, "surge_baseline": [OLD, OTHER, SPARE]})
    decision = advance(run, world([OLD, OTHER, SPARE, LATE], 4, ready=[OLD, OTHER, SPARE]), SETTINGS, T0)
    first, second = decision.run.steps
    assert (first.surge_instance_id, second.surge_instance_id) == (SPARE, LATE)
    assert first.state is StepState.UNDO_DRAINING  # its spare has a node: drained before it goes
    assert [s.command.instance_id for s in effects(decision, SendCommand)] == [SPARE]
    assert [(t.instance_id, t.decrement) for t in effects(decision, TerminateInstance)] == [(LATE, True)]
    later = advance(decision.run, world([OLD, OTHER, SPARE], 3), SETTINGS, T0 + timedelta(seconds=1000))
    assert "give_back deadline" not in later.run.steps[1].note


def test_a_spare_no_other_step_can_claim_is_still_taken_without_a_node_first() -> None:
    # both new instances outside the second step's baseline too: either may be either's; no node first, as before
    run = two_undoing({"note": CANCELLING}, {"note": CANCELLING})
    decision = advance(run, world([OLD, OTHER, SPARE, LATE], 4, ready=[OLD, OTHER, SPARE]), SETTINGS, T0)
    assert [s.surge_instance_id for s in decision.run.steps] == [LATE, SPARE]
