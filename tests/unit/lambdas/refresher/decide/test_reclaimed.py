"""A worker step whose old instance Spot reclaims under it (during its drain, or before the run's termination reached
it): the spare the run surged is the replacement and stays; the surge unit is given back exactly once (invariant 4:
desired capacity ends where it was), never by draining away the spare that just took the old node's pods. Pure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.runs import RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from lambdas.refresher.world import World
from tests.unit.lambdas.refresher.decide_world import NODES, OLD, OTHER, SETTINGS, SPARE, T0, caps, effects, run, world

REPLACEMENT = "i-00000000000000009"  # Auto Scaling's replacement of the reclaimed instance (desired kept)
LATER = T0 + timedelta(seconds=60)
DRAIN = {"command_id": "refresh-r1-0", "surge_instance_id": SPARE}
RUNNING = {"refresh-r1-0": {"status": "running", "command": {"deadline": (T0 + timedelta(seconds=120)).isoformat()}}}


def with_commands(base: World) -> World:
    return World(groups=base.groups, nodes=base.nodes, commands=RUNNING, membership_confirmed=True)


@pytest.mark.parametrize("state", [StepState.DRAINING, StepState.TERMINATING])
def test_reclaimed_before_auto_scaling_replaced_it_lowers_desired_capacity_and_keeps_the_spare(
    state: StepState,
) -> None:
    # desired 3 (2 + the surge), 2 live: the old instance left without the run's decrement
    decision = advance(run(state, 1, T0, **DRAIN), with_commands(world([OTHER, SPARE], 3)), SETTINGS, LATER)
    assert caps(decision) == [(NODES, 2, None)]  # the unit given back: Auto Scaling launches nothing for it
    assert not effects(decision, TerminateInstance) and not effects(decision, SendCommand)  # the spare stays
    assert decision.run.groups[0].raised == 1  # given back once read back (``test_lowering_read_back``)
    later = LATER + timedelta(seconds=60)
    after = advance(decision.run, with_commands(world([OTHER, SPARE], 2)), SETTINGS, later)
    assert not caps(after) and not effects(after, TerminateInstance) and not effects(after, SendCommand)
    step = after.run.steps[0]
    assert step.state is StepState.DONE and after.run.groups[0].raised == 0
    assert after.run.status is RunStatus.SUCCEEDED


@pytest.mark.parametrize("state", [StepState.DRAINING, StepState.TERMINATING])
def test_reclaimed_and_already_replaced_by_auto_scaling_gives_that_replacement_back_not_the_spare(
    state: StepState,
) -> None:
    w = World(
        groups=world([OTHER, SPARE, REPLACEMENT], 3).groups,
        nodes=world([OTHER, SPARE], 3).nodes,
        commands=RUNNING,
        membership_confirmed=True,  # REPLACEMENT has no record in the agent's whole list: no node
    )
    decision = advance(run(state, 1, T0, **DRAIN), w, SETTINGS, LATER)
    (terminate,) = effects(decision, TerminateInstance)
    assert (terminate.instance_id, terminate.decrement) == (REPLACEMENT, True)  # no node yet: nothing to drain
    assert not caps(decision) and not effects(decision, SendCommand)
    step = decision.run.steps[0]
    assert step.state is StepState.UNDO_TERMINATING and decision.run.groups[0].raised == 1  # counted once it left

    # the replacement left the group (desired 2 by the decrement): the step is done, the unit given back once
    after = advance(decision.run, with_commands(world([OTHER, SPARE], 2)), SETTINGS, LATER + timedelta(seconds=30))
    assert not caps(after) and not effects(after, TerminateInstance)
    assert after.run.steps[0].state is StepState.DONE and after.run.groups[0].raised == 0
    assert after.run.status is RunStatus.SUCCEEDED


def test_the_runs_own_termination_with_decrement_is_not_given_back_twice() -> None:
    # the usual end: TerminateInstanceInAutoScalingGroup(decrement) lowered desired to 2 and the instance left
    decision = advance(run(StepState.TERMINATING, 1, T0, **DRAIN), world([OTHER, SPARE], 2), SETTINGS, LATER)
    assert not caps(decision) and not effects(decision, TerminateInstance)
    assert decision.run.steps[0].state is StepState.DONE and decision.run.groups[0].raised == 0


def test_reclaimed_with_its_spare_gone_too_gives_the_surge_back_as_before() -> None:
    decision = advance(run(StepState.DRAINING, 1, T0, **DRAIN), with_commands(world([OTHER], 3)), SETTINGS, LATER)
    assert decision.run.steps[0].state is not StepState.DONE


def test_a_spare_reclaimed_while_it_is_given_back_still_gives_the_unit_back_once() -> None:
    # the run paused and gives its spare back (terminate with decrement asked); Spot reclaimed the spare first, so
    # the decrement never happened: desired is still 3 with 2 live instances
    undo = {"command_id": "refresh-r1-0", "surge_instance_id": SPARE, "note": "drain failed: surge given back"}
    decision = advance(run(StepState.UNDO_TERMINATING, 1, T0, **undo), world([OLD, OTHER], 3), SETTINGS, LATER)
    assert caps(decision) == [(NODES, 2, None)] and decision.run.groups[0].raised == 1
    after = advance(decision.run, world([OLD, OTHER], 2), SETTINGS, LATER + timedelta(seconds=60))
    assert not caps(after) and not effects(after, TerminateInstance)
    step = after.run.steps[0]
    assert step.state is StepState.UNDONE and after.run.groups[0].raised == 0
    # and once Auto Scaling replaced the reclaimed spare, that replacement is given back instead
    w = world([OLD, OTHER, REPLACEMENT], 3, ready=[OLD, OTHER])
    decision = advance(run(StepState.UNDO_TERMINATING, 1, T0, **undo), w, SETTINGS, LATER)
    (terminate,) = effects(decision, TerminateInstance)
    assert (terminate.instance_id, terminate.decrement) == (REPLACEMENT, True) and not caps(decision)
    assert decision.run.steps[0].state is StepState.UNDO_TERMINATING and decision.run.groups[0].raised == 1
