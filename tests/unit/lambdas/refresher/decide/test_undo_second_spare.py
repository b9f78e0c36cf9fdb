"""A step that gives back a second spare (its first, drained for the give-back, was reclaimed before the terminate
with decrement: Auto Scaling's replacement is given back instead, ``undo.give_back_unit``) drains it under a new id.
Under the first drain's id the record refuses the new drain, and the first drain's ``succeeded`` would read as this
spare's: it was terminated undrained, with whatever pods it had taken (invariant 3). Plain values in, decision out."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide_world import OLD, OTHER, SETTINGS, SPARE, T0, effects, run, world

NEW = "i-00000000000000009"  # Auto Scaling's replacement of the reclaimed spare, a node with pods


def test_the_replacement_of_a_reclaimed_spare_is_drained_under_a_new_id_not_read_as_drained() -> None:
    r = run(StepState.UNDO_TERMINATING, 1, T0, surge_instance_id=SPARE, note="drain timed_out: surge given back")
    cid = f"refresh-{r.run_id}-0-undo"
    r.steps[0].undo_command_id = cid
    drained = {
        "status": "succeeded",
        "instance_id": SPARE,
        "started_at": T0.isoformat(),
        "result": {"status": "succeeded", "message": "drained"},
        "command": {"command_id": cid, "instance_id": SPARE, "deadline": (T0 + timedelta(seconds=300)).isoformat()},
    }
    # the spare reclaimed: gone from the group, desired capacity unchanged (no decrement), its replacement a node
    base = world([OLD, OTHER, NEW], 3, ready=[OLD, OTHER, NEW])
    w = replace(base, commands={cid: drained}, membership_confirmed=True)
    now = T0 + timedelta(seconds=400)
    first = advance(r, w, SETTINGS, now)
    step = first.run.steps[0]
    assert (step.state, step.surge_instance_id, step.undo_command_id) == (
        StepState.UNDO_DRAINING,
        NEW,
        f"{cid}-2",
    )
    (send,) = effects(first, SendCommand)
    assert (send.command.command_id, send.command.instance_id) == (f"{cid}-2", NEW)
    # the next pass: the new drain not recorded yet, the old one still succeeded: nothing is terminated
    later = advance(first.run, w, SETTINGS, now + timedelta(seconds=60))
    assert not effects(later, TerminateInstance)
    assert later.run.steps[0].state is StepState.UNDO_DRAINING
