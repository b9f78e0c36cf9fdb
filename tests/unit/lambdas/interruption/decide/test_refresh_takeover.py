"""A Spot warning for a node a refresh run is replacing (rules 4 and 5b): the warning takes the refresh drain over
(tightened to the Spot deadline, one drain) and launches no second replacement beside the run's spare. Pure
decisions, under the default ``REBALANCE_POLICY`` (``cordon``): the active run is read for every Spot warning."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.model import CommandKind
from core.runs import StepState
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import RecordCommand, SendCommand, Skip, SkipReason, TightenCommand
from tests.unit.lambdas.interruption.decision_world import INSTANCE, NOW, T0, active_run, kinds, settings, spot, world
from tests.unit.lambdas.interruption.decision_world import command_item as item

RUN_ID = "20240305T101000Z-abcdef"


def refresh_drain(status: str = "running", suffix: str = "") -> dict:
    """The ``CMD#`` item of the refresher's drain of step 0 (``Context.command``'s id and reason)."""
    command_id = f"refresh-{RUN_ID}-0" + (f"-{suffix}" if suffix else "")
    return item(command_id, "drain", status, quiet=None, reason=f"refresh {RUN_ID} step 0")


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_spot_warning_tightens_the_refresh_drain_instead_of_a_second_drain(status: str) -> None:
    run = active_run(trigger="schedule", steps=((INSTANCE, StepState.DRAINING),))
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(refresh_drain(status),), active_run=run))
    tighten = plan.actions[0]
    assert isinstance(tighten, TightenCommand)
    assert tighten.command_id == f"refresh-{RUN_ID}-0"
    assert tighten.deadline == T0 + timedelta(seconds=120)  # the Spot deadline, from the event time
    assert tighten.fallback.command_id == "spot-ev-1" and tighten.fallback.kind is CommandKind.DRAIN
    assert not any(isinstance(a, RecordCommand | SendCommand) for a in plan.actions)  # no second drain


def test_the_run_spare_is_the_replacement_no_early_detach() -> None:
    run = active_run(trigger="schedule", steps=((INSTANCE, StepState.DRAINING),))
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(refresh_drain(),), active_run=run))
    assert "DetachInstance" not in kinds(plan) and "RecordDetach" not in kinds(plan)
    skip = next(a for a in plan.actions if isinstance(a, Skip) and a.step == "early_replacement")
    assert skip.reason is SkipReason.ALREADY_REPLACING and RUN_ID in skip.describe()


@pytest.mark.parametrize(
    ("state", "detached"),
    [
        (StepState.SURGING, False),  # its spare is launching: that is the replacement
        (StepState.TERMINATING, False),
        (StepState.PENDING, True),  # not started: the run skips a step whose instance left its group
        (StepState.UNDOING, True),  # the run gives its spare back and keeps the instance: replace it early
        (StepState.DONE, True),
    ],
)
def test_early_replacement_follows_what_the_refresh_does_with_the_instance(state: StepState, detached: bool) -> None:
    run = active_run(trigger="schedule", steps=((INSTANCE, state),))
    plan = decide(spot(), NOW, settings(), replace(world(), active_run=run))
    assert ("DetachInstance" in kinds(plan)) is detached


def test_a_refresh_drain_that_ended_is_not_tightened_the_spot_drain_is_recorded() -> None:
    run = active_run(trigger="schedule", steps=((INSTANCE, StepState.DRAINING),))
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(refresh_drain("succeeded"),), active_run=run))
    assert kinds(plan)[:2] == ["RecordCommand", "SendCommand"]
    assert "TightenCommand" not in kinds(plan)


def test_a_refresh_undo_drain_of_a_spare_is_taken_over_too() -> None:
    # a Spot warning for a spare the run is draining to give back: the same one drain, with the Spot deadline
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(refresh_drain(suffix="undo"),)))
    tighten = plan.actions[0]
    assert isinstance(tighten, TightenCommand) and tighten.command_id == f"refresh-{RUN_ID}-0-undo"


def test_a_drain_of_another_operation_is_not_taken_over() -> None:
    other = item("lifecycle-ev-7", "drain", "running", quiet=None, reason="asg-lifecycle:terminate")
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(other,)))
    assert kinds(plan)[:2] == ["RecordCommand", "SendCommand"]
