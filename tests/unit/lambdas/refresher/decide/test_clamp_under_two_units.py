"""kOps sets MaxSize back under a surge of two units (``max_surge`` 2): Auto Scaling clamps desired capacity to the
group's own size, both units are gone. ``replace.unit_taken`` judges a clamp only for the one step of its group
holding a unit, so two drained steps each terminate their old instance with decrement: two more instances removed,
the group two below the size kOps set and below its Ready nodes at the start (docs/DESIGN.md invariants 1 and 4).
A MaxSize read below ``original_desired + raised`` (no step of the group surging, whose raise may not be visible
yet) is firm: desired capacity cannot hold that many units, whatever other units are in motion. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.runs import RunStep, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import TerminateInstance
from lambdas.refresher.world import World
from tests.unit.lambdas.refresher.decide_world import (
    DRAINED,
    NODES,
    OLD,
    OTHER,
    SETTINGS,
    SPARE,
    T0,
    effects,
    run,
    world,
)

LATER = T0 + timedelta(seconds=60)
FOURTH = "i-00000000000000004"
THIRD_OLD = "i-00000000000000005"


@pytest.mark.parametrize("state", [StepState.DRAINING, StepState.TERMINATING])
@pytest.mark.parametrize(("max_size", "decrements"), [(3, [False, False]), (4, [False, True]), (5, [True, True])])
def test_a_clamp_under_two_units_removes_no_second_instance(
    state: StepState, max_size: int, decrements: list[bool]
) -> None:
    # orig 3 (OLD, OTHER, THIRD_OLD), surged to 5 (MaxSize raised from 4) for steps 0 (OLD, spare SPARE) and 1
    # (OTHER, spare FOURTH), both drained. kOps set MaxSize ``max_size`` back: desired clamped to it, Auto Scaling has
    # not removed anything yet (5 live). As many terminations go without decrement as units are gone, step 0's first
    r = run(state, 2, T0, surge_instance_id=SPARE, command_id="refresh-r1-0")
    second = RunStep(
        index=1,
        group=NODES,
        role="node",
        instance_id=OTHER,
        state=state,
        intent_at=T0,
        surge_instance_id=FOURTH,
        command_id="refresh-r1-1",
        surge_baseline=[OLD, OTHER, THIRD_OLD],
    )
    group = r.groups[0].model_copy(update={"original_desired": 3})
    r = r.model_copy(update={"steps": [r.steps[0], second], "groups": [group]})
    base = world([OLD, OTHER, THIRD_OLD, SPARE, FOURTH], max_size)
    facts = replace(base.groups[NODES], max_size=max_size)
    w = World(
        groups={NODES: facts},
        nodes=base.nodes,
        commands={"refresh-r1-0": DRAINED, "refresh-r1-1": DRAINED},
        membership_confirmed=True,
    )
    decision = advance(r, w, SETTINGS, LATER)
    terminations = sorted(effects(decision, TerminateInstance), key=lambda t: t.instance_id)
    assert [(t.instance_id, t.decrement) for t in terminations] == list(zip([OLD, OTHER], decrements, strict=True))


def test_after_a_clamp_of_one_unit_under_two_the_group_ends_at_its_own_size() -> None:
    # as above with MaxSize 4: OLD went without decrement, OTHER with it (desired 3); both left, nothing launched
    r = run(StepState.TERMINATING, 2, T0, surge_instance_id=SPARE, command_id="refresh-r1-0")
    second = r.steps[0].model_copy(
        update={"index": 1, "instance_id": OTHER, "surge_instance_id": FOURTH, "command_id": "refresh-r1-1"}
    )
    group = r.groups[0].model_copy(update={"original_desired": 3, "max_raised_to": 5})
    r = r.model_copy(update={"steps": [r.steps[0], second], "groups": [group]})
    base = world([THIRD_OLD, SPARE, FOURTH], 3)
    w = World(groups={NODES: replace(base.groups[NODES], max_size=4)}, nodes=base.nodes, membership_confirmed=True)
    decision = advance(r, w, SETTINGS, LATER)
    assert not effects(decision, TerminateInstance)
    assert [s.state for s in decision.run.steps] == [StepState.DONE, StepState.DONE]
    assert decision.run.groups[0].raised == 0 and decision.run.groups[0].original_desired == 3
