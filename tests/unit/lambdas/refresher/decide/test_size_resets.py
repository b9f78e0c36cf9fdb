"""kOps resets a surged group's sizes under a refresh run (``kops update cluster`` applies the instance-group spec's
MinSize and MaxSize at any time, DESIGN.md "kOps owns the ASGs' sizes"): the run reads the sizes back, never removes
an instance for a unit Auto Scaling already took, and never retries a call Auto Scaling refuses without a bound.
Pure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.runs import RunStatus, StepState, WaitDeadline
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import SendCommand, TerminateInstance
from tests.unit.lambdas.refresher.decide_world import (
    DRAINED,
    NODES,
    OLD,
    OTHER,
    SETTINGS,
    SPARE,
    T0,
    caps,
    effects,
    run,
    sized,
    world,
)

LATER = T0 + timedelta(seconds=60)
UNDO = "refresh-r1-0-undo"


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


def test_a_max_size_reset_below_the_surge_is_not_fought_the_run_pauses_and_gives_the_surge_back() -> None:
    # surged 2 -> 3 under MaxSize 4; kOps applied a spec with MaxSize 2: desired clamped to 2. Asking for 3 again
    # would be refused (above MaxSize 2) every grace period; raising MaxSize back would fight kOps
    decision = advance(run(StepState.SURGING, 1, T0), sized(world([OLD, OTHER], 2), max_size=2), SETTINGS, LATER)
    assert not caps(decision) and not effects(decision, TerminateInstance)
    assert decision.run.status is RunStatus.PAUSED and "MaxSize of nodes-a.c reset to 2" in decision.run.reason
    assert decision.run.steps[0].state is StepState.UNDONE and decision.run.groups[0].raised == 0


def test_a_raise_never_read_back_meets_the_spare_launch_deadline() -> None:
    # MaxSize untouched, the raise keeps not showing (refused, or reset again each time): redone within the deadline
    r = run(StepState.SURGING, 1, T0)
    r.steps[0].waiting_since[WaitDeadline.SPARE_LAUNCH.value] = T0
    within = advance(r, world([OLD, OTHER], 2), SETTINGS, LATER)
    assert caps(within) == [(NODES, 3, None)] and within.run.status is RunStatus.RUNNING
    late = T0 + timedelta(seconds=SETTINGS.deadline_seconds(WaitDeadline.SPARE_LAUNCH) + 1)
    past = advance(r, world([OLD, OTHER], 2), SETTINGS, late)
    assert not caps(past) and past.run.status is RunStatus.PAUSED and "spare_launch deadline" in past.run.reason
    assert past.run.steps[0].state is StepState.UNDONE and past.run.groups[0].raised == 0


# kOps raised MinSize to 3 under a surge 2 -> 3: a termination with decrement is refused ("desiredSize equals minSize")
AT_MIN = sized(world([OLD, OTHER, SPARE], 3), min_size=3, **{"refresh-r1-0": DRAINED})
NEW = "i-00000000000000009"  # Auto Scaling's replacement of the old instance terminated without decrement


@pytest.mark.parametrize("state", [StepState.DRAINING, StepState.TERMINATING])
def test_at_min_size_the_old_instance_goes_without_decrement_and_the_unit_is_the_groups_own(state: StepState) -> None:
    r = run(state, 1, T0, surge_instance_id=SPARE, command_id="refresh-r1-0")
    decision = advance(r, AT_MIN, SETTINGS, LATER)
    (terminate,) = effects(decision, TerminateInstance)
    assert (terminate.instance_id, terminate.decrement) == (OLD, False)  # never the call Auto Scaling refuses
    assert decision.run.steps[0].state is StepState.TERMINATING and decision.run.groups[0].raised == 1
    # the old instance left, Auto Scaling launched its replacement (desired kept at MinSize 3): the run is over
    after = sized(world([OTHER, SPARE, NEW], 3), min_size=3)
    done = advance(decision.run, after, SETTINGS, LATER + timedelta(seconds=60))
    assert not caps(done) and not effects(done, TerminateInstance)
    assert done.run.steps[0].state is StepState.DONE and "MinSize 3" in done.run.steps[0].note
    group = done.run.groups[0]
    assert (group.raised, group.original_desired) == (0, 3) and done.run.status is RunStatus.SUCCEEDED


def test_a_spare_given_back_at_min_size_is_kept_as_the_groups_own() -> None:
    # the run paused; the spare's termination with decrement would be refused at MinSize 3
    r = run(StepState.UNDO_TERMINATING, 1, T0, surge_instance_id=SPARE, undo_command_id=UNDO)
    w = sized(world([OLD, OTHER, SPARE], 3), min_size=3, **{UNDO: DRAINED})
    decision = advance(r, w, SETTINGS, LATER)
    assert not effects(decision, TerminateInstance) and not caps(decision)
    assert [(s.command.kind.value, s.command.instance_id) for s in effects(decision, SendCommand)] == [
        ("uncordon", SPARE)
    ]
    assert decision.run.steps[0].state is StepState.UNDONE and "MinSize" in decision.run.steps[0].note
    assert (decision.run.groups[0].raised, decision.run.groups[0].original_desired) == (0, 3)
