"""Verify before acting: a notice is acted on only when DescribeInstances (and, for a lifecycle action,
DescribeAutoScalingInstances) agrees with what it claims (pure)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.lifecycle import LifecycleAction
from core.model import NodeRecord
from lambdas.events.event import Event, EventKind
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import EFFECTS, ForgetNode, IgnoreReason
from lambdas.interruption.world import InstanceFacts, World

from .decision_world import INSTANCE, NODES_ASG, NOW, T0, rebalance, settings, spot, world


def refused(plan) -> bool:  # type: ignore[no-untyped-def]  # a Plan
    ack = plan.acknowledged
    return (
        ack is not None
        and ack.reason is IgnoreReason.UNVERIFIED
        and not any(isinstance(a, EFFECTS) for a in plan.actions)
    )


@pytest.mark.parametrize("notice", [spot(), rebalance()], ids=["spot", "rebalance"])
@pytest.mark.parametrize(
    ("ec2_state", "market", "acted"),
    [
        ("running", "spot", True),
        ("pending", "spot", True),
        ("shutting-down", "spot", True),
        ("running", "", False),  # an On-Demand worker: a forged warning must not drain or detach it
        ("running", "scheduled", False),
        ("stopped", "spot", False),  # nothing left to drain
        ("terminated", "spot", False),
        (None, "spot", False),  # EC2 was not asked: fail closed
    ],
)
def test_spot_notices_need_a_live_spot_instance(notice: Event, ec2_state, market, acted) -> None:  # type: ignore[no-untyped-def]
    plan = decide(notice, NOW, settings(), world(ec2_state=ec2_state, market=market))
    assert refused(plan) is not acted
    if not acted:
        assert INSTANCE in plan.acknowledged.detail  # type: ignore[union-attr]  # refused() checked it


def test_an_unknown_instance_stays_unknown_not_unverified() -> None:
    plan = decide(spot(), NOW, settings(), world(group=None, state=None, known=False))
    assert plan.acknowledged is not None and plan.acknowledged.reason is IgnoreReason.UNKNOWN_INSTANCE


def state_change(state: str) -> Event:
    return Event(
        kind=EventKind.INSTANCE_STATE_CHANGE,
        event_id="ev-s",
        event_time=T0,
        instance_id=INSTANCE,
        instance_state=state,
        source="aws.ec2",
        detail_type="EC2 Instance State-change Notification",
    )


MEMBER = NodeRecord(instance_id=INSTANCE, node_name="n1", reported_at=T0 - timedelta(seconds=5))


@pytest.mark.parametrize(
    ("claimed", "facts", "acted"),
    [
        ("terminated", InstanceFacts(INSTANCE, state="terminated"), True),
        ("terminated", InstanceFacts(INSTANCE, known=False), True),  # gone from EC2 altogether
        ("stopping", InstanceFacts(INSTANCE, state="stopped"), True),
        ("shutting-down", InstanceFacts(INSTANCE, state="terminated"), True),
        ("terminated", InstanceFacts(INSTANCE, state="running"), False),  # a forged state change
        ("stopping", InstanceFacts(INSTANCE, state="pending"), False),
        ("terminated", InstanceFacts(INSTANCE), False),  # EC2 was not asked: fail closed
    ],
)
def test_a_going_state_change_needs_ec2_to_agree(claimed: str, facts: InstanceFacts, acted: bool) -> None:
    plan = decide(state_change(claimed), T0, settings(), World(instance=facts, membership=MEMBER))
    if acted:
        assert plan.actions[0] == ForgetNode(INSTANCE)
    else:
        assert refused(plan)


def test_state_changes_that_change_nothing_need_no_check() -> None:
    unread = InstanceFacts(INSTANCE)
    running = decide(state_change("running"), T0, settings(), World(instance=unread, membership=MEMBER))
    stranger = decide(state_change("terminated"), T0, settings(), World(instance=unread))
    assert running.acknowledged.reason is IgnoreReason.STATE_IGNORED  # type: ignore[union-attr]
    assert stranger.acknowledged.reason is IgnoreReason.NOT_A_MEMBER  # type: ignore[union-attr]


def hook_action(asg_name: str = NODES_ASG) -> Event:
    return Event(
        kind=EventKind.TERMINATE_LIFECYCLE_ACTION,
        event_id="ev-h",
        event_time=T0,
        instance_id=INSTANCE,
        lifecycle=LifecycleAction(
            instance_id=INSTANCE, asg_name=asg_name, hook_name="node-manager-drain", token="tok", event_id="ev-h"
        ),
        source="aws.autoscaling",
        detail_type="EC2 Instance-terminate Lifecycle Action",
    )


@pytest.mark.parametrize(
    ("lifecycle_state", "acted"),
    [
        ("Terminating:Wait", True),
        ("InService", False),  # a forged action for a live member: must not drain it
        ("Terminating:Proceed", False),  # the hook was already completed: nothing waits on a drain
        ("Terminating", False),
        ("Pending:Wait", False),  # a launch hook, not a termination hook
        ("Standby", False),
    ],
)
def test_a_lifecycle_action_needs_the_instance_in_terminating_wait(lifecycle_state: str, acted: bool) -> None:
    plan = decide(hook_action(), NOW, settings(), world(state=lifecycle_state))
    assert refused(plan) is not acted
    if not acted:
        assert lifecycle_state in plan.acknowledged.detail  # type: ignore[union-attr]  # refused() checked it


def test_a_lifecycle_action_naming_another_group_than_auto_scaling_reports_is_refused() -> None:
    plan = decide(hook_action("nodes-us-east-1b.demo.k8s.local"), NOW, settings(), world(state="Terminating:Wait"))
    assert refused(plan) and NODES_ASG in plan.acknowledged.detail  # type: ignore[union-attr]  # refused() checked it
