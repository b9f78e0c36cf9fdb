"""The Spot deadline counted from ``min(event time, now)`` (``common.deadline_of``) in combination: every
``instance-action``, a warning delivered late, a redelivery decided later, a warning that takes a drain over, and a
recommendation after a warning that lets the instance come back. Pure decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.model import CommandKind
from core.runs import StepState
from lambdas.events.event import InstanceAction
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import RecordCommand, SendCommand, TightenCommand
from tests.unit.lambdas.interruption.decision_world import (
    INSTANCE,
    T0,
    active_run,
    rebalance,
    recorded,
    settings,
    spot,
    world,
)
from tests.unit.lambdas.interruption.decision_world import command_item as item

RUN_ID = "20240305T101000Z-abcdef"
AHEAD = T0 - timedelta(seconds=90)  # our clock, 90 s behind the event's time (accepted skew: up to 300 s)


def first_command(action: InstanceAction, now):
    record = decide(spot(action), now, settings(), world()).actions[0]
    assert isinstance(record, RecordCommand)
    return record.command


@pytest.mark.parametrize(
    ("action", "kind", "seconds"),
    [
        (InstanceAction.TERMINATE, CommandKind.DRAIN, 120),
        (InstanceAction.STOP, CommandKind.DRAIN, 120),
        (InstanceAction.HIBERNATE, CommandKind.CORDON, 0),
    ],
)
def test_every_instance_action_stamped_ahead_counts_from_now(action, kind, seconds):
    command = first_command(action, AHEAD)
    assert command.kind is kind and command.deadline == AHEAD + timedelta(seconds=seconds)


@pytest.mark.parametrize("age", [0, 100, 120])
def test_a_warning_delivered_late_keeps_the_deadline_of_its_own_time(age):
    """Issued ``age`` seconds before it is decided: the instance goes at event time + 120 s, not two minutes from
    now (a deadline 100 s old leaves the agent 20 s; a hibernate's is already past, and the agent still cordons)."""
    now = T0 + timedelta(seconds=age)
    assert first_command(InstanceAction.TERMINATE, now).deadline == T0 + timedelta(seconds=120)
    assert first_command(InstanceAction.HIBERNATE, now).deadline == T0


def test_a_redelivery_decided_later_resends_the_recorded_deadline_not_a_later_one():
    """Stamped ahead, each decision counts from its own ``now``: a redelivery would ask a later deadline. Its own
    ``CMD#`` item is found by the same command id, and the command is sent again as recorded."""
    command = first_command(InstanceAction.TERMINATE, AHEAD)
    later = AHEAD + timedelta(seconds=40)
    again = decide(spot(), later, settings(), world(command=recorded(command, "queued")))
    [send] = [a for a in again.actions if isinstance(a, SendCommand)]
    assert send.resend and send.command.deadline == AHEAD + timedelta(seconds=120)
    assert not any(isinstance(a, RecordCommand) for a in again.actions)


def test_a_warning_stamped_ahead_tightens_a_refresh_drain_to_two_minutes_from_now():
    """The takeover (rule 5b) asks the deadline the warning's own drain would have: the tightened drain is the one
    the agent bounds its graces by and runs at once (``DRAIN_URGENT_SECONDS``)."""
    drain = item(f"refresh-{RUN_ID}-0", "drain", "running", quiet=None, reason=f"refresh {RUN_ID} step 0")
    run = active_run(trigger="schedule", steps=((INSTANCE, StepState.DRAINING),))
    plan = decide(spot(), AHEAD, settings(), replace(world(), commands=(drain,), active_run=run))
    tighten = plan.actions[0]
    assert isinstance(tighten, TightenCommand) and tighten.deadline == AHEAD + timedelta(seconds=120)
    assert tighten.fallback.deadline == tighten.deadline


@pytest.mark.parametrize("action", [InstanceAction.STOP, InstanceAction.HIBERNATE])
@pytest.mark.parametrize("status", ["succeeded", "skipped"])
def test_a_recommendation_after_a_warning_whose_instance_comes_back_is_decided_as_usual(action, status):
    """A ``stop`` or ``hibernate`` warning's instance comes back; only a warning to terminate (its own drain) makes a
    later recommendation ``already_interrupted``."""
    kind = "cordon" if action is InstanceAction.HIBERNATE else "drain"
    warned = item("spot-ev-1", kind, status, quiet=None, reason=f"spot-interruption:{action.value}")
    plan = decide(rebalance("ev-3"), T0 + timedelta(seconds=5), settings(), replace(world(), commands=(warned,)))
    assert any(isinstance(a, RecordCommand) for a in plan.actions), plan
