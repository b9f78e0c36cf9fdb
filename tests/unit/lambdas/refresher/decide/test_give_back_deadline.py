"""Giving capacity back has a deadline (``WaitDeadline.GIVE_BACK``, invariant 8). Before, a step giving its surge unit
back waited for ever for Auto Scaling to launch the instance it would give back (an AZ with no capacity), a lowering
of desired capacity refused for good (AccessDenied; a validation error after kOps changed MinSize) was asked again
every pass, and so was a MaxSize restore at the run's end: the run never ended, kept every other run out and its groups
from compensation (``Run.busy_groups``), and took the lock every pass. Past the deadline the step ends ``failed`` with
its unit left raised and recorded (``GroupSurge.unreturned``, ``max_left``), nothing lowered or terminated on the way
(a lowering while the group holds more instances would let Auto Scaling pick one undrained), and the run ends
``failed`` naming the group and what is left raised, the lock released. Pure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.model import CommandKind
from core.runs import RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import Metric, ReleaseLock, SendCommand, SetCapacity, TerminateInstance
from lambdas.refresher.summary import run_summary
from tests.unit.lambdas.refresher.decide_world import (
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

EXTRA = "i-00000000000000009"  # a live instance of the surge's baseline: not one to give back
FIRST = T0 + timedelta(seconds=60)
LATE = FIRST + timedelta(hours=1)  # past any sane give-back deadline


def ended_failed(decision, *words: str) -> None:
    """The run ended ``failed``, its reason naming the group and ``words``, the lock released, nothing lowered,
    restored or terminated, the failure counted; the summary says what is left raised."""
    r = decision.run
    assert r.status is RunStatus.FAILED, (r.status, r.reason, r.waiting)
    assert NODES in r.reason and all(w in r.reason for w in words), r.reason
    assert effects(decision, ReleaseLock) and not decision.waits
    assert not effects(decision, SetCapacity) and not effects(decision, TerminateInstance)
    assert {m.name for m in effects(decision, Metric)} >= {"RunFailures", "CapacityLeftRaised"}
    assert run_summary(r)["left_raised"][NODES]
    for g in r.groups:
        assert g.raised == r.units_held(g.name)


def test_an_undo_waiting_for_a_spare_to_launch_ends_the_run_failed_at_its_deadline() -> None:
    r = run(StepState.UNDOING, 1, T0, note="run pausing: surge given back")
    r.steps[0].surge_baseline = [OLD, OTHER, EXTRA]
    w = world([OLD, OTHER, EXTRA], 3)
    first = advance(r, w, SETTINGS, FIRST)
    assert first.run.status.active and not caps(first)
    late = advance(first.run, w, SETTINGS, LATE)
    (step,) = late.run.steps
    assert step.state is StepState.FAILED and "left raised" in step.note
    assert late.run.groups[0].unreturned == 1 and late.run.groups[0].raised == 0
    ended_failed(late, "1 surge unit")


def test_a_reclaimed_step_waiting_for_a_replacement_to_give_back_ends_the_run_failed_at_its_deadline() -> None:
    r = run(StepState.DRAINING, 1, T0, command_id="refresh-r1-0", surge_instance_id=SPARE)
    r.steps[0].surge_baseline = [OLD, OTHER, EXTRA]
    w = world([OTHER, EXTRA, SPARE], 3)
    first = advance(r, w, SETTINGS, FIRST)
    assert first.run.status.active and not caps(first)
    late = advance(first.run, w, SETTINGS, LATE)
    assert late.run.steps[0].state is StepState.FAILED and late.run.groups[0].unreturned == 1
    ended_failed(late, "1 surge unit")


def test_a_lowering_refused_for_good_ends_the_run_failed_at_its_deadline() -> None:
    r = run(StepState.UNDOING, 1, T0, note="spare_launch deadline passed: surge given back")
    w = world([OLD, OTHER], 3)
    first = advance(r, w, SETTINGS, FIRST)
    assert caps(first) == [(NODES, 2, None)]
    # AWS refuses the UpdateAutoScalingGroup every time: desired capacity stays 3
    again = advance(first.run, w, SETTINGS, FIRST + timedelta(seconds=120))
    assert caps(again) == [(NODES, 2, None)] and again.run.status.active
    late = advance(again.run, w, SETTINGS, LATE)
    assert late.run.steps[0].state is StepState.FAILED and late.run.groups[0].unreturned == 1
    ended_failed(late, "1 surge unit")
    # read back in time, the same lowering ends the step undone, nothing left raised
    done = advance(again.run, world([OLD, OTHER], 2), SETTINGS, LATE)
    assert done.run.steps[0].state is StepState.UNDONE and done.run.groups[0].unreturned == 0


def test_a_max_size_restore_refused_for_good_ends_the_run_failed_at_its_deadline() -> None:
    r = run(StepState.DONE, 0, T0, surge_instance_id=SPARE)
    r.groups[0].max_raised_to = 5
    w = sized(world([OTHER, SPARE], 2), max_size=5)
    first = advance(r, w, SETTINGS, FIRST)
    assert caps(first) == [(NODES, None, 4)] and first.run.status.active
    again = advance(first.run, w, SETTINGS, FIRST + timedelta(seconds=120))
    assert caps(again) == [(NODES, None, 4)] and again.run.status.active
    late = advance(again.run, w, SETTINGS, LATE)
    assert late.run.groups[0].max_left == 5
    ended_failed(late, "MaxSize 5")
    # read back in time: the run succeeds
    back = advance(again.run, replace(w, groups={NODES: replace(w.groups[NODES], max_size=4)}), SETTINGS, LATE)
    assert back.run.status is RunStatus.SUCCEEDED and back.run.groups[0].max_left is None


@pytest.mark.parametrize("read", [True, False])
def test_a_spare_whose_termination_is_refused_for_good_is_kept_uncordoned_and_the_run_ends_failed(read: bool) -> None:
    """The spare's terminate with decrement refused every time (AccessDenied): before, terminated again every grace
    period for ever. Past the deadline the spare, drained by the undo, is kept and uncordoned (invariant 6), whether
    or not the pass read its drain's item (``read``: the gather reads no command of a step ``undo_terminating``)."""
    cid = "refresh-r1-0-undo"
    r = run(StepState.UNDO_TERMINATING, 1, T0, surge_instance_id=SPARE, undo_command_id=cid, note="drain failed")
    drained = {"status": "succeeded", "result": {"message": ""}, "command": {"deadline": T0.isoformat()}}
    w = replace(world([OLD, OTHER, SPARE], 3), commands={cid: drained} if read else {})
    first = advance(r, w, SETTINGS, FIRST)
    assert [t.instance_id for t in effects(first, TerminateInstance)] == [SPARE]
    late = advance(first.run, w, SETTINGS, LATE)
    (uncordon,) = effects(late, SendCommand)
    assert (uncordon.command.kind, uncordon.command.instance_id) == (CommandKind.UNCORDON, SPARE)
    step = late.run.steps[0]
    assert step.state is StepState.FAILED and f"spare {SPARE} kept and uncordoned" in step.note
    assert late.run.groups[0].unreturned == 1
    ended_failed(late, "1 surge unit")
