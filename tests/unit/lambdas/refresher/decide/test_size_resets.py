"""kOps resets a surged group's sizes under a refresh run (``kops update cluster`` applies the instance-group spec's
MinSize and MaxSize at any time, DESIGN.md "kOps owns the ASGs' sizes"): the run reads the sizes back, never removes
an instance for a unit Auto Scaling already took, and never retries a call Auto Scaling refuses without a bound.
Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.runs import StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from lambdas.refresher.world import World
from tests.unit.lambdas.refresher.test_decide import NODES, OLD, OTHER, SETTINGS, SPARE, T0, caps, effects, run, world

LATER = T0 + timedelta(seconds=60)
UNDO = "refresh-r1-0-undo"


def sized(base: World, min_size: int | None = None, max_size: int | None = None, **commands: object) -> World:
    """``base`` with the group's MinSize and MaxSize as kOps set them, and the run's commands (by id)."""
    group = base.groups[NODES]
    group = replace(
        group,
        min_size=group.min_size if min_size is None else min_size,
        max_size=group.max_size if max_size is None else max_size,
    )
    return World(groups={NODES: group}, nodes=base.nodes, commands=commands)


DRAINED = {"status": "succeeded", "result": {"message": ""}, "command": {"deadline": T0.isoformat()}}


# kOps set MaxSize back to 2 under a surge 2 -> 3: Auto Scaling clamped desired to 2 and removed OTHER; the old
# instance and the spare are left, both Ready. The unit is gone: giving it back again would leave one worker.
CLAMPED = world([OLD, SPARE], 2)


@pytest.mark.parametrize(
    ("state", "step", "commands"),
    [
        (StepState.UNDOING, {}, {}),
        (StepState.UNDO_DRAINING, {"undo_command_id": UNDO}, {UNDO: DRAINED}),
        (StepState.UNDO_TERMINATING, {"undo_command_id": UNDO}, {UNDO: DRAINED}),
    ],
)
def test_a_unit_auto_scaling_took_back_under_a_max_size_reset_is_not_given_back_twice(
    state: StepState, step: dict[str, object], commands: dict[str, object]
) -> None:
    r = run(state, 1, T0, surge_instance_id=SPARE, note="nodes_ready deadline passed: surge given back", **step)
    decision = advance(r, sized(CLAMPED, max_size=2, **commands), SETTINGS, LATER)
    assert not effects(decision, TerminateInstance) and not caps(decision)
    assert decision.run.steps[0].state is StepState.UNDONE and decision.run.groups[0].raised == 0
    assert "spare i-00000000000000002 kept" in decision.run.steps[0].note
    sent = [(s.command.kind.value, s.command.instance_id) for s in effects(decision, SendCommand)]
    # a spare the undo drained is uncordoned: it stays the group's
    assert sent == ([("uncordon", SPARE)] if step else [])


def test_a_spare_given_back_while_desired_capacity_still_holds_its_unit_is_still_drained_and_terminated() -> None:
    r = run(StepState.UNDO_DRAINING, 1, T0, surge_instance_id=SPARE, undo_command_id=UNDO)
    decision = advance(r, sized(world([OLD, OTHER, SPARE], 3), **{UNDO: DRAINED}), SETTINGS, LATER)
    (terminate,) = effects(decision, TerminateInstance)
    assert (terminate.instance_id, terminate.decrement) == (SPARE, True)
    assert decision.run.steps[0].state is StepState.UNDO_TERMINATING and decision.run.groups[0].raised == 1
