"""Rules 7 (termination lifecycle action) and 8 (instance state change) of the interruption decision. Pure."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from core.lifecycle import LifecycleAction
from core.model import CommandKind, NodeRecord
from lambdas.events.event import Event, EventKind
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import (
    Acknowledge,
    AwaitDrain,
    CancelCommand,
    CompleteHook,
    ForgetNode,
    IgnoreReason,
    RecordCommand,
    RecordHook,
    SendCommand,
    Skip,
    SkipReason,
)
from lambdas.interruption.world import InstanceFacts, World
from tests.unit.lambdas.interruption.decision_world import INSTANCE, NODES_ASG, T0, asg, settings

TOKEN = "87654321-4321-4321-4321-210987654321"


def hook_notice(hook: str = "node-manager-drain") -> Event:
    return Event(
        kind=EventKind.TERMINATE_LIFECYCLE_ACTION,
        event_id="ev-h",
        event_time=T0,
        instance_id=INSTANCE,
        lifecycle=LifecycleAction(
            instance_id=INSTANCE, asg_name=NODES_ASG, hook_name=hook, token=TOKEN, event_id="ev-h"
        ),
        source="aws.autoscaling",
        detail_type="EC2 Instance-terminate Lifecycle Action",
    )


def state_notice(state: str) -> Event:
    return Event(
        kind=EventKind.INSTANCE_STATE_CHANGE,
        event_id="ev-s",
        event_time=T0,
        instance_id=INSTANCE,
        instance_state=state,
        source="aws.ec2",
        detail_type="EC2 Instance State-change Notification",
    )


def in_asg(**world: Any) -> World:
    return World(instance=InstanceFacts(INSTANCE, asg=asg(), lifecycle_state="Terminating:Wait"), **world)


def drain(command_id: str, status: str, finished_minutes_ago: float | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "sk": f"CMD#{command_id}",
        "kind": "drain",
        "instance_id": INSTANCE,
        "status": status,
        "command": {"command_id": command_id},
    }
    if finished_minutes_ago is not None:
        item["finished_at"] = (T0 - timedelta(minutes=finished_minutes_ago)).isoformat()
    return item


def kinds(plan: Any) -> list[type]:
    return [type(a) for a in plan.actions]


def test_a_hook_with_no_drain_records_and_sends_one_with_the_hooks_deadline() -> None:
    plan = decide(hook_notice(), T0 + timedelta(seconds=5), settings(lifecycle_drain_timeout_seconds=600), in_asg())
    assert kinds(plan) == [RecordHook, RecordCommand, SendCommand]
    command = plan.actions[2].command
    assert command.command_id == "lifecycle-ev-h" and command.kind is CommandKind.DRAIN
    assert command.deadline == T0 + timedelta(seconds=600)


@pytest.mark.parametrize(
    "commands, expected",
    [
        ((drain("refresh-1", "running"),), AwaitDrain),
        ((drain("spot-1", "queued"),), AwaitDrain),
        ((drain("refresh-1", "succeeded", 10),), CompleteHook),
        ((drain("refresh-1", "succeeded", 120),), SendCommand),  # older than LIFECYCLE_RECENT_DRAIN_SECONDS (1 h)
        ((drain("refresh-1", "failed", 1),), SendCommand),
        (({**drain("c-1", "running"), "kind": "cordon"},), SendCommand),  # only drains count
        # a drain whose end is unreadable or has no time zone is no recent drain: this action gets its own
        (({**drain("refresh-1", "succeeded"), "finished_at": "bogus"},), SendCommand),
        (({**drain("refresh-1", "succeeded"), "finished_at": T0.replace(tzinfo=None).isoformat()},), SendCommand),
    ],
)
def test_one_drain_not_two(commands: tuple[dict[str, Any], ...], expected: type) -> None:
    plan = decide(hook_notice(), T0 + timedelta(seconds=5), settings(), in_asg(commands=commands))
    assert kinds(plan)[0] is RecordHook and kinds(plan)[-1] is expected


def test_a_duplicate_hook_event_changes_nothing_once_its_drain_runs() -> None:
    own = drain("lifecycle-ev-h", "running")
    plan = decide(
        hook_notice(),
        T0 + timedelta(seconds=5),
        settings(),
        in_asg(commands=(own,), command=own, hook={"token": TOKEN, "state": "pending"}),
    )
    assert plan.actions[0] == Skip("hook", SkipReason.HOOK_ALREADY_RECORDED)
    assert plan.acknowledged is not None and plan.acknowledged.reason is IgnoreReason.DUPLICATE


@pytest.mark.parametrize(
    "notice, now, world, reason",
    [
        (hook_notice("other-tools-hook"), T0, in_asg(), IgnoreReason.FOREIGN_HOOK),
        (hook_notice(), T0 + timedelta(seconds=901), in_asg(), IgnoreReason.LATE),
        (
            hook_notice(),
            T0,
            World(instance=InstanceFacts(INSTANCE, asg=asg(cluster="other"))),
            IgnoreReason.OTHER_CLUSTER,
        ),
    ],
)
def test_hooks_that_are_not_ours_to_act_on(notice: Event, now: Any, world: World, reason: IgnoreReason) -> None:
    plan = decide(notice, now, settings(), world)
    assert plan.actions == (Acknowledge(reason, plan.actions[0].detail),)


def test_a_going_instance_is_forgotten_and_its_queued_commands_cancelled() -> None:
    member = NodeRecord(instance_id=INSTANCE, node_name="n1", reported_at=T0)
    world = World(
        instance=InstanceFacts(INSTANCE, state="shutting-down"),
        membership=member,
        commands=(drain("spot-1", "queued"), drain("refresh-1", "running"), drain("old", "succeeded", 5)),
    )
    plan = decide(state_notice("shutting-down"), T0, settings(), world)
    assert plan.actions == (ForgetNode(INSTANCE), CancelCommand("spot-1", "instance shutting-down"))


@pytest.mark.parametrize(
    "state, member, reason",
    [
        ("running", True, IgnoreReason.STATE_IGNORED),
        ("stopped", True, IgnoreReason.STATE_IGNORED),
        ("terminated", False, IgnoreReason.NOT_A_MEMBER),
    ],
)
def test_other_state_changes_are_acknowledged(state: str, member: bool, reason: IgnoreReason) -> None:
    record = NodeRecord(instance_id=INSTANCE, node_name="n1", reported_at=T0) if member else None
    plan = decide(state_notice(state), T0, settings(), World(instance=InstanceFacts(INSTANCE), membership=record))
    assert plan.acknowledged is not None and plan.acknowledged.reason is reason
