"""A spare whose give-back drain ended (``undo_terminating``: its terminate with decrement refused or not made yet)
and whose surge unit kOps then took back (a spec's MaxSize written under the surge: Auto Scaling clamped desired
capacity and removed another instance) is kept (``undo.taken_back``): it was drained, so its node is uncordoned.
The pass reads no command of a step ``undo_terminating`` (``passes.looked_at_commands``), so the spare's drain,
absent from the world, read as never sent and the uncordon was left out: the kept spare stayed cordoned for good
(storm seed 152141, "8 a cordon of ours is resolved within a bound"). Pure."""

from __future__ import annotations

from datetime import timedelta

from core.model import CommandKind
from core.runs import RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide_world import OLD, SETTINGS, SPARE, T0, effects, run, world

LATER = T0 + timedelta(seconds=60)
UNDO = "refresh-r1-0-undo"


def test_a_kept_spare_whose_drain_ended_is_uncordoned() -> None:
    # orig 2, surged to 3 (spare SPARE); the run paused, SPARE drained and its terminate refused; kOps then clamped
    # desired capacity back to 2 (Auto Scaling removed OTHER): the unit is gone, SPARE stays the group's
    r = run(
        StepState.UNDO_TERMINATING, 1, T0, surge_instance_id=SPARE, undo_command_id=UNDO, note="run pausing"
    ).model_copy(update={"status": RunStatus.PAUSING})
    decision = advance(r, world([OLD, SPARE], 2), SETTINGS, LATER)
    assert decision.run.steps[0].state is StepState.UNDONE
    assert decision.run.groups[0].raised == 0
    assert not effects(decision, TerminateInstance)
    sent = [(c.command.kind, c.command.instance_id) for c in effects(decision, SendCommand)]
    assert sent == [(CommandKind.UNCORDON, SPARE)]
