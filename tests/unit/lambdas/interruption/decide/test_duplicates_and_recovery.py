"""Duplicates and crash recovery in the interruption decision (pure): a redelivered notice resends a command only if
it is still queued, completes an intended detach, and command ids are deterministic per notice."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.model import Command
from lambdas.interruption.decide import command_id_for, decide
from lambdas.interruption.plan import (
    Acknowledge,
    DetachInstance,
    IgnoreReason,
    MarkDetached,
    SendCommand,
    Skip,
    SkipReason,
)
from lambdas.interruption.world import InstanceFacts, World
from tests.unit.lambdas.interruption.decision_world import (
    INSTANCE,
    NODES_ASG,
    NOW,
    asg,
    kinds,
    rebalance,
    recorded,
    settings,
    spot,
    world,
)


def first_command() -> Command:
    return decide(spot(), NOW, settings(), world()).actions[0].command


def test_queued_command_is_resent_as_recorded():
    original = first_command().model_copy(update={"node_name": "recorded-name"})
    plan = decide(
        spot(),
        NOW + timedelta(seconds=10),
        settings(),
        world(command=recorded(original, "queued"), detach={"state": "detached", "asg_name": NODES_ASG}),
    )
    assert plan.actions[0] == SendCommand(original, resend=True)
    assert plan.actions[1] == Skip("early_replacement", SkipReason.ALREADY_DETACHED)
    assert plan.acknowledged is None


@pytest.mark.parametrize("status", ["running", "succeeded", "failed", "timed_out", "skipped"])
def test_started_or_finished_command_is_not_resent(status):
    plan = decide(
        spot(),
        NOW,
        settings(),
        world(command=recorded(first_command(), status), detach={"state": "detached", "asg_name": NODES_ASG}),
    )
    assert kinds(plan) == ["Skip", "Skip", "Acknowledge"]
    assert plan.acknowledged == Acknowledge(IgnoreReason.DUPLICATE, "command and early replacement already done")


def test_intended_detach_is_completed_while_the_instance_is_still_in_its_group():
    plan = decide(
        spot(),
        NOW,
        settings(),
        world(command=recorded(first_command(), "running"), detach={"state": "intended", "asg_name": NODES_ASG}),
    )
    assert plan.actions[1:] == (DetachInstance(INSTANCE, NODES_ASG), MarkDetached(INSTANCE))


def test_intended_detach_of_an_instance_already_out_of_its_group_is_only_marked():
    facts = InstanceFacts(INSTANCE, known=True, asg=asg(), lifecycle_state=None, state="running", market="spot")
    plan = decide(
        spot(),
        NOW,
        settings(),
        World(
            instance=facts,
            command=recorded(first_command(), "queued"),
            detach={"state": "intended", "asg_name": NODES_ASG},
        ),
    )
    assert [type(a) for a in plan.actions] == [SendCommand, MarkDetached]


def test_intended_detach_is_completed_even_if_early_replacement_was_turned_off_since():
    plan = decide(
        spot(), NOW, settings(early_replacement=False), world(detach={"state": "intended", "asg_name": NODES_ASG})
    )
    assert kinds(plan) == ["RecordCommand", "SendCommand", "DetachInstance", "MarkDetached"]


def test_rebalance_duplicate_is_acknowledged():
    command = decide(rebalance(), NOW, settings(), world()).actions[0].command
    plan = decide(rebalance(), NOW, settings(), world(command=recorded(command, "succeeded")))
    assert plan.acknowledged is not None and plan.acknowledged.reason is IgnoreReason.DUPLICATE


def test_command_ids_are_deterministic_and_distinct_per_kind():
    assert command_id_for(spot(event_id="x")) == command_id_for(spot(event_id="x")) == "spot-x"
    assert command_id_for(rebalance(event_id="x")) == "rebalance-x"


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("InService", [DetachInstance(INSTANCE, NODES_ASG), MarkDetached(INSTANCE)]),
        ("Standby", [DetachInstance(INSTANCE, NODES_ASG), MarkDetached(INSTANCE)]),
        # the first DetachInstances took effect (its answer lost: a timeout, a 5xx): Auto Scaling is removing it
        ("Detaching", [MarkDetached(INSTANCE)]),
        # Auto Scaling is terminating it (Spot reclaimed it, a scale-in): nothing to detach, the intent stays for the
        # replenisher's sweep, which marks it gone once EC2 ends it
        ("Terminating", []),
        ("Terminating:Wait", []),
        ("Terminating:Proceed", []),
    ],
)
def test_an_intended_detach_is_asked_of_auto_scaling_only_for_an_instance_it_can_detach(state, expected):
    """DetachInstances answers ``ValidationError`` "The instance i-... is not in InService or Standby." for any other
    lifecycle state (not "not part of" the group: the adapter raises it). Asked for a redelivered warning whose intent
    a crash left ``intended``, it failed the invocation at every delivery, and the intent was never marked."""
    recorded_detach = {"state": "intended", "asg_name": NODES_ASG}
    plan = decide(
        spot(),
        NOW,
        settings(),
        world(state=state, command=recorded(first_command(), "running"), detach=recorded_detach),
    )
    assert [a for a in plan.actions if isinstance(a, DetachInstance | MarkDetached)] == expected
