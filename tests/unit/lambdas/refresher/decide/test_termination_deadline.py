"""A drained old instance that Auto Scaling keeps in service after the run asked for its termination (a refusal the run
does not know, sent again every grace period) ends at the ``termination`` deadline: the run pauses, the node is
uncordoned and kept, the surge is given back (or, handed over, left to the step that holds it). Before, the step
asked again every grace period forever (invariant 8). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.runs import Run, RunStatus, StepState, WaitDeadline
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world

STILL = world([OLD, OTHER, SPARE], 3)  # the old instance still InService: the termination did not happen
LIMIT = SETTINGS.deadline_seconds(WaitDeadline.TERMINATION)


def _terminating(**step: object) -> Run:
    r = run(StepState.TERMINATING, 1, T0, surge_instance_id=SPARE, command_id="refresh-r1-0", **step)
    r.steps[0].waiting_since[WaitDeadline.TERMINATION.value] = T0
    return r


def test_within_the_deadline_the_termination_is_asked_again_after_the_grace_period() -> None:
    later = T0 + timedelta(seconds=min(LIMIT, 300))
    decision = advance(_terminating(), STILL, SETTINGS, later)
    (terminate,) = effects(decision, TerminateInstance)
    assert (terminate.instance_id, terminate.decrement) == (OLD, True)
    assert decision.run.status is RunStatus.RUNNING and decision.run.steps[0].state is StepState.TERMINATING


def test_past_the_deadline_the_run_pauses_keeps_and_uncordons_the_node_and_gives_the_surge_back() -> None:
    late = T0 + timedelta(seconds=LIMIT + 1)
    decision = advance(_terminating(), STILL, SETTINGS, late)
    assert all(t.instance_id != OLD for t in effects(decision, TerminateInstance))
    sent = [(s.command.kind.value, s.command.instance_id) for s in effects(decision, SendCommand)]
    assert ("uncordon", OLD) in sent
    assert (
        decision.run.status in (RunStatus.PAUSING, RunStatus.PAUSED) and "termination deadline" in decision.run.reason
    )
    step = decision.run.steps[0]
    assert step.state in (StepState.UNDOING, StepState.UNDO_DRAINING) and "still in service" in step.note
    assert WaitDeadline.TERMINATION.value not in step.waiting_since


def test_a_step_that_handed_its_unit_over_is_kept_and_leaves_the_unit_to_its_successor() -> None:
    late = T0 + timedelta(seconds=LIMIT + 1)
    decision = advance(_terminating(handed_over_to=1), STILL, SETTINGS, late)
    step = decision.run.steps[0]
    assert step.state is StepState.UNDONE and "surge unit is step 1's" in step.note
    assert decision.run.groups[0].raised == 1  # not given back here: the successor holds it
    assert [(s.command.kind.value, s.command.instance_id) for s in effects(decision, SendCommand)] == [
        ("uncordon", OLD)
    ]
