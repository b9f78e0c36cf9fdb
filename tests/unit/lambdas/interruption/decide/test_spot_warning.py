"""Rule 3 of the interruption decision, the Spot warning (pure): a command per warning, its kind and deadline by the
warning's ``instance-action`` as AWS documents them, the node name from fresh membership only."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.model import CommandKind
from lambdas.events.event import InstanceAction
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import (
    Acknowledge,
    DetachInstance,
    IgnoreReason,
    MarkDetached,
    RecordCommand,
    RecordDetach,
    SendCommand,
)
from tests.unit.lambdas.interruption.decision_world import (
    CLUSTER,
    INSTANCE,
    NODES_ASG,
    NOW,
    T0,
    kinds,
    member,
    settings,
    spot,
    world,
)


def test_spot_terminate_on_a_worker_drains_and_replaces_early():
    plan = decide(spot(), NOW, settings(), world(membership=member(NOW - timedelta(seconds=30))))
    assert kinds(plan) == ["RecordCommand", "SendCommand", "RecordDetach", "DetachInstance", "MarkDetached"]
    record, send = plan.actions[0], plan.actions[1]
    assert isinstance(record, RecordCommand) and isinstance(send, SendCommand)
    command = record.command
    assert send.command == command and not send.resend
    assert command.command_id == "spot-ev-1"
    assert command.kind is CommandKind.DRAIN
    assert command.cluster == CLUSTER and command.instance_id == INSTANCE
    assert command.deadline == T0 + timedelta(seconds=120)
    assert command.node_name == "ip-10-0-1-5.ec2.internal"
    assert command.reason == "spot-interruption:terminate"
    assert plan.actions[2] == RecordDetach(INSTANCE, NODES_ASG, "spot-interruption:ev-1")
    assert plan.actions[3] == DetachInstance(INSTANCE, NODES_ASG)
    assert plan.actions[4] == MarkDetached(INSTANCE)
    assert plan.acknowledged is None


def test_spot_deadline_counts_from_the_event_time_not_from_now():
    later = T0 + timedelta(seconds=90)
    plan = decide(spot(), later, settings(spot_deadline_seconds=100), world())
    assert plan.actions[0].command.deadline == T0 + timedelta(seconds=100)


@pytest.mark.parametrize(
    ("membership", "expected"),
    [
        (None, None),  # the node never joined, or the agent has not reported it: the agent resolves it
        (member(NOW - timedelta(seconds=599)), "ip-10-0-1-5.ec2.internal"),
        (member(NOW - timedelta(seconds=601)), None),  # stale: MEMBERSHIP_MAX_AGE_SECONDS=600
    ],
)
def test_node_name_comes_only_from_fresh_membership(membership, expected):
    plan = decide(spot(), NOW, settings(membership_max_age_seconds=600), world(membership=membership))
    assert plan.actions[0].command.node_name == expected


@pytest.mark.parametrize(
    ("action", "kind", "notice"),
    [
        # AWS: the warning comes "two minutes before Amazon EC2 stops or terminates your Spot Instance"
        (InstanceAction.TERMINATE, CommandKind.DRAIN, 120),
        (InstanceAction.STOP, CommandKind.DRAIN, 120),
        # AWS: no two-minute warning for hibernation, "the hibernation process begins immediately"
        (InstanceAction.HIBERNATE, CommandKind.CORDON, 0),
    ],
)
def test_each_instance_action_gets_the_documented_deadline(action, kind, notice):
    command = decide(spot(action), NOW, settings(), world()).actions[0].command
    assert command.kind is kind
    assert command.deadline == T0 + timedelta(seconds=notice)
    assert command.reason == f"spot-interruption:{action.value}"


def test_the_spot_deadline_setting_moves_terminate_and_stop_not_hibernate():
    for action, deadline in [
        (InstanceAction.STOP, T0 + timedelta(seconds=90)),
        (InstanceAction.HIBERNATE, T0),
    ]:
        command = decide(spot(action), NOW, settings(spot_deadline_seconds=90), world()).actions[0].command
        assert command.deadline == deadline


def test_a_hibernate_warning_is_acted_on_until_the_spot_deadline_setting_passes():
    """No time is left before a hibernation, but the cordon still helps: it is late only when a stop would be."""
    assert kinds(decide(spot(InstanceAction.HIBERNATE), T0 + timedelta(seconds=119), settings(), world()))[0] == (
        "RecordCommand"
    )
    late = decide(spot(InstanceAction.HIBERNATE), T0 + timedelta(seconds=121), settings(), world())
    assert late.actions == (Acknowledge(IgnoreReason.LATE, "event is 121 s old"),)


@pytest.mark.parametrize("ahead", [1, 60, 299])
def test_a_warning_stamped_ahead_of_our_clock_still_leaves_two_minutes_at_most(ahead):
    """The event's ``time`` is EC2's clock, accepted up to ``MAX_CLOCK_SKEW_SECONDS`` ahead of ours; the warning cannot
    have been issued after it reached us, so the instance goes at most two minutes from now. A deadline counted from a
    time ahead of ours would be later than the reclaim: the agent would bound the pods' graces by it, and a deadline
    more than ``DRAIN_URGENT_SECONDS`` away would make the drain wait for a slot while the instance dies."""
    early = T0 - timedelta(seconds=ahead)  # our clock, behind the event's time
    command = decide(spot(), early, settings(), world()).actions[0].command
    assert command.deadline == early + timedelta(seconds=120)
    hibernate = decide(spot(InstanceAction.HIBERNATE), early, settings(), world()).actions[0].command
    assert hibernate.deadline == early
