"""Rebalance recommendations (rule 5: the policy's command, which never detaches) and those that resolve (rules 5a,
5b and the resolutions of rules 7 and 8): pure decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from core.lifecycle import LifecycleAction
from core.model import CommandKind
from core.settings import RebalancePolicy
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import (
    Acknowledge,
    CancelCommand,
    IgnoreReason,
    RecordCommand,
    ResolveCordon,
    SendCommand,
    TightenCommand,
)
from tests.unit.lambdas.interruption.decision_world import (
    INSTANCE,
    MASTER_ASG,
    NOW,
    T0,
    asg,
    kinds,
    rebalance,
    settings,
    spot,
    world,
)
from tests.unit.lambdas.interruption.decision_world import command_item as item


def with_commands(*items: dict) -> Any:
    return replace(world(), commands=tuple(items))


@pytest.mark.parametrize(
    ("policy", "kind"),
    [(RebalancePolicy.CORDON, CommandKind.CORDON), (RebalancePolicy.DRAIN, CommandKind.DRAIN)],
)
@pytest.mark.parametrize("group", [asg(), asg(MASTER_ASG, role_tag="k8s.io/role/master")])
def test_rebalance_follows_the_policy_and_never_detaches(policy, kind, group):
    now = T0 + timedelta(seconds=30)
    plan = decide(
        rebalance(), now, settings(rebalance_policy=policy, rebalance_drain_timeout_seconds=900), world(group=group)
    )
    assert kinds(plan) == ["RecordCommand", "SendCommand"]
    command = plan.actions[0].command
    assert command.kind is kind
    assert command.command_id == "rebalance-ev-2"
    assert command.deadline == now + timedelta(seconds=900)
    assert command.reason == "rebalance-recommendation"


def test_rebalance_ignored_by_policy():
    plan = decide(rebalance(), NOW, settings(rebalance_policy=RebalancePolicy.IGNORE), world())
    assert plan.actions == (Acknowledge(IgnoreReason.REBALANCE_IGNORED, "REBALANCE_POLICY=ignore"),)


def test_default_rebalance_policy_is_cordon():
    plan = decide(rebalance(), NOW, settings(), world())
    assert plan.actions[0].command.kind is CommandKind.CORDON


def test_a_rebalance_cordon_carries_the_quiet_period() -> None:
    plan = decide(rebalance(), NOW, settings(rebalance_quiet_seconds=900), world())
    assert kinds(plan) == ["RecordCommand", "SendCommand"]
    record = plan.actions[0]
    assert isinstance(record, RecordCommand)
    assert record.command.kind is CommandKind.CORDON
    assert record.command.options.uncordon_after_seconds == 900


def test_a_rebalance_drain_carries_it_too_and_a_spot_command_does_not() -> None:
    drain = decide(rebalance(), NOW, settings(rebalance_policy=RebalancePolicy.DRAIN), world()).actions[0]
    assert isinstance(drain, RecordCommand) and drain.command.options.uncordon_after_seconds == 1800
    warned = decide(spot(), NOW, settings(), world()).actions[0]
    assert isinstance(warned, RecordCommand) and warned.command.options.uncordon_after_seconds is None


@pytest.mark.parametrize("status", ["queued", "running", "succeeded", "timed_out"])
def test_another_recommendation_while_one_holds_the_node_changes_nothing(status: str) -> None:
    plan = decide(rebalance("ev-9"), NOW, settings(), with_commands(item("rebalance-ev-2", "cordon", status)))
    ack = plan.acknowledged
    assert ack is not None and ack.reason is IgnoreReason.REBALANCE_IN_EFFECT
    assert kinds(plan) == ["Acknowledge"]


@pytest.mark.parametrize(
    "earlier",
    [
        item("rebalance-ev-2", "cordon", "succeeded", resolution="released"),  # given back: a new one cordons again
        item("rebalance-ev-2", "cordon", "failed"),  # held nothing
        item("rebalance-ev-2", "cordon", "succeeded", quiet=None),  # an old command no one gives back
    ],
)
def test_a_recommendation_after_one_resolved_or_holding_nothing_cordons_again(earlier: dict) -> None:
    plan = decide(rebalance("ev-9"), NOW, settings(), with_commands(earlier))
    assert kinds(plan) == ["RecordCommand", "SendCommand"]


def test_a_recommendation_while_a_drain_runs_changes_nothing() -> None:
    plan = decide(rebalance(), NOW, settings(), with_commands(item("spot-ev-1", "drain", "running", quiet=None)))
    ack = plan.acknowledged
    assert ack is not None and ack.reason is IgnoreReason.ALREADY_DRAINING


def test_the_same_recommendation_again_is_judged_by_its_own_record() -> None:
    own = item("rebalance-ev-2", "cordon", "queued")
    recorded = {
        **own,
        "command": {
            **own["command"],
            "cluster": "demo.k8s.local",
            "instance_id": INSTANCE,
            "deadline": NOW.isoformat(),
        },
    }
    plan = decide(rebalance(), NOW, settings(), replace(world(), command=recorded, commands=(recorded,)))
    assert kinds(plan) == ["SendCommand"]  # re-sent as recorded, not acknowledged as its own duplicate


def test_a_spot_warning_tightens_a_running_rebalance_drain_instead_of_a_second_drain() -> None:
    running = item("rebalance-ev-2", "drain", "running")
    plan = decide(spot(), NOW, settings(), with_commands(running))
    assert kinds(plan)[:2] == ["TightenCommand", "ResolveCordon"]
    assert not any(isinstance(a, (RecordCommand, SendCommand)) for a in plan.actions)
    tighten = plan.actions[0]
    assert isinstance(tighten, TightenCommand)
    assert tighten.command_id == "rebalance-ev-2" and tighten.deadline == T0 + timedelta(seconds=120)
    assert tighten.fallback.command_id == "spot-ev-1" and tighten.fallback.kind is CommandKind.DRAIN
    assert plan.actions[1] == ResolveCordon("rebalance-ev-2", "escalated by spot-ev-1")
    assert "RecordDetach" in kinds(plan)  # the early replacement is unchanged


def test_a_spot_warning_escalates_a_rebalance_cordon_to_a_drain() -> None:
    cordon = item("rebalance-ev-2", "cordon", "succeeded")
    plan = decide(spot(), NOW, settings(), with_commands(cordon))
    assert kinds(plan)[:3] == ["RecordCommand", "SendCommand", "ResolveCordon"]
    record = plan.actions[0]
    assert isinstance(record, RecordCommand) and record.command.kind is CommandKind.DRAIN
    assert plan.actions[2] == ResolveCordon("rebalance-ev-2", "escalated by spot-ev-1")


def test_a_hibernate_warning_does_not_tighten_a_drain_to_no_time_at_all() -> None:
    running = item("rebalance-ev-2", "drain", "running")
    plan = decide(spot(InstanceAction.HIBERNATE), NOW, settings(), with_commands(running))
    assert "TightenCommand" not in kinds(plan)
    assert kinds(plan)[:3] == ["RecordCommand", "SendCommand", "ResolveCordon"]


def test_a_cordon_already_resolved_is_not_resolved_again() -> None:
    cordon = item("rebalance-ev-2", "cordon", "succeeded", resolution="released")
    plan = decide(spot(), NOW, settings(), with_commands(cordon))
    assert "ResolveCordon" not in kinds(plan)


def test_a_state_change_keeps_a_rebalance_cordon_and_cancels_what_is_queued() -> None:
    notice = Event(
        kind=EventKind.INSTANCE_STATE_CHANGE,
        event_id="ev-5",
        event_time=T0,
        instance_id=INSTANCE,
        instance_state="stopping",
        source="aws.ec2",
        detail_type="EC2 Instance State-change Notification",
    )
    held = item("rebalance-ev-2", "cordon", "succeeded")
    queued = item("rebalance-ev-3", "cordon", "queued")
    ec2_agrees = replace(world(ec2_state="stopping"), commands=(held, queued))  # EC2 verifies the claim (rule 9)
    plan = decide(notice, NOW, settings(), ec2_agrees)
    assert plan.actions == (
        CancelCommand("rebalance-ev-3", "instance stopping"),
        ResolveCordon("rebalance-ev-2", "instance stopping"),
    )


def test_a_lifecycle_action_keeps_a_rebalance_cordon() -> None:
    action = LifecycleAction(
        instance_id=INSTANCE,
        asg_name="nodes-us-east-1a.demo.k8s.local",
        hook_name="node-manager-drain",
        token="tok-1",
    )
    notice = Event(
        kind=EventKind.TERMINATE_LIFECYCLE_ACTION,
        event_id="ev-6",
        event_time=T0,
        instance_id=INSTANCE,
        lifecycle=action,
        source="aws.autoscaling",
        detail_type="EC2 Instance-terminate Lifecycle Action",
    )
    # Auto Scaling holds the instance on the hook (lambdas.interruption.verify, rule 9)
    waiting = replace(world(state="Terminating:Wait"), commands=(item("rebalance-ev-2", "cordon", "succeeded"),))
    plan = decide(notice, NOW, settings(), waiting)
    assert ResolveCordon("rebalance-ev-2", "escalated by lifecycle action lifecycle-ev-6") in plan.actions
    assert not isinstance(plan.actions[-1], Acknowledge)
