"""A surge unit the run gives back by lowering desired capacity (a surge that launched nothing; an instance that
left without the run's decrement, before Auto Scaling replaced it) counts as given back only once a later pass reads
the lower value back, as a MaxSize restore does (``lifecycle.finish_groups``, seed 1280): the ``RUN#`` save comes
before the UpdateAutoScalingGroup it records, so an update refused (throttled) or an invocation that ended between the
two left the step final and the group one unit above its own size for good; Auto Scaling then launched the unit once
it could, and the replenisher read it as a shortfall (docs/DESIGN.md invariant 4). Pure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.runs import RunStatus, StepState
from lambdas.refresher.decide import advance
from lambdas.refresher.plan import TerminateInstance
from tests.unit.lambdas.refresher.decide_world import NODES, OLD, OTHER, SETTINGS, SPARE, T0, caps, effects, run, world

LATER = T0 + timedelta(seconds=60)
DRAIN = {"command_id": "refresh-r1-0", "surge_instance_id": SPARE}


def passes(state: StepState, final: StepState, live: list[str], **extra: object) -> None:
    """Three passes: the lowering asked; asked again while not read back; the unit given back once read back."""
    r = run(state, 1, T0, **extra)
    first = advance(r, world(live, 3), SETTINGS, LATER)
    assert caps(first) == [(NODES, 2, None)] and not effects(first, TerminateInstance)
    assert first.run.steps[0].state is not final and first.run.groups[0].raised == 1
    assert first.run.status.active
    # the update was refused, or the invocation ended before it: desired capacity still 3, asked again
    again = advance(first.run, world(live, 3), SETTINGS, LATER + timedelta(seconds=300))
    assert caps(again) == [(NODES, 2, None)] and again.run.status.active
    # read back: the unit is given back once, nothing asked again
    done = advance(again.run, world(live, 2), SETTINGS, LATER + timedelta(seconds=600))
    assert not caps(done) and not effects(done, TerminateInstance)
    assert done.run.steps[0].state is final and done.run.groups[0].raised == 0
    assert done.run.status is not RunStatus.RUNNING


def test_a_surge_that_launched_nothing_is_given_back_once_its_lowering_is_read_back() -> None:
    passes(StepState.UNDOING, StepState.UNDONE, [OLD, OTHER], note="spare_launch deadline passed: surge given back")


@pytest.mark.parametrize("state", [StepState.DRAINING, StepState.TERMINATING])
def test_an_old_instance_reclaimed_gives_its_unit_back_once_the_lowering_is_read_back(state: StepState) -> None:
    passes(state, StepState.DONE, [OTHER, SPARE], **DRAIN)


def test_a_spare_reclaimed_while_given_back_gives_its_unit_back_once_the_lowering_is_read_back() -> None:
    passes(StepState.UNDO_TERMINATING, StepState.UNDONE, [OLD, OTHER], note="drain failed: surge given back", **DRAIN)
