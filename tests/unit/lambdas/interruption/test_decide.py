"""The interruption decision, rule by rule (pure: notice + world + clock + settings -> plan)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, NODE_ROLE_TAG
from core.model import Command, CommandKind, NodeRecord
from core.settings import InterruptionSettings, RebalancePolicy
from lambdas.events.event import Event, EventKind, InstanceAction
from lambdas.interruption.decide import command_id_for, decide
from lambdas.interruption.plan import (
    Acknowledge,
    DetachInstance,
    IgnoreReason,
    MarkDetached,
    RecordCommand,
    RecordDetach,
    SendCommand,
    Skip,
    SkipReason,
)
from lambdas.interruption.world import InstanceFacts, World

CLUSTER = "demo.k8s.local"
INSTANCE = "i-0a1b2c3d4e5f60718"
T0 = datetime(2024, 3, 5, 10, 15, 30, tzinfo=UTC)
NODES_ASG = "nodes-us-east-1a.demo.k8s.local"
MASTER_ASG = "master-us-east-1a.masters.demo.k8s.local"


def settings(**overrides) -> InterruptionSettings:
    base = {"cluster_name": CLUSTER, "table_name": "state", "queue_url": "https://sqs/q"}
    return InterruptionSettings(**{**base, **overrides})


def spot(action: InstanceAction = InstanceAction.TERMINATE, event_id: str = "ev-1") -> Event:
    return Event(
        kind=EventKind.SPOT_INTERRUPTION,
        event_id=event_id,
        event_time=T0,
        instance_id=INSTANCE,
        instance_action=action,
        source="aws.ec2",
        detail_type="EC2 Spot Instance Interruption Warning",
    )


def rebalance(event_id: str = "ev-2") -> Event:
    return Event(
        kind=EventKind.REBALANCE_RECOMMENDATION,
        event_id=event_id,
        event_time=T0,
        instance_id=INSTANCE,
        source="aws.ec2",
        detail_type="EC2 Instance Rebalance Recommendation",
    )


def asg(name: str = NODES_ASG, cluster: str | None = CLUSTER, role_tag: str | None = NODE_ROLE_TAG) -> dict:
    tags = [{"Key": INSTANCE_GROUP_TAG, "Value": name.split(".")[0]}]
    if cluster is not None:
        tags.append({"Key": CLUSTER_TAG, "Value": cluster})
    if role_tag is not None:
        tags.append({"Key": role_tag, "Value": "1"})
    return {
        "AutoScalingGroupName": name,
        "AvailabilityZones": ["us-east-1a"],
        "Tags": tags,
        "MinSize": 1,
        "MaxSize": 4,
        "DesiredCapacity": 2,
    }


def world(
    group: dict | None = None,
    state: str | None = "InService",
    known: bool = True,
    membership=None,
    command=None,
    detach=None,
    ec2_state: str | None = "running",
    market: str = "spot",
) -> World:
    """What AWS says: by default a running Spot Instance InService in the cluster's worker group."""
    group = asg() if group is None and state is not None else group
    return World(
        instance=InstanceFacts(
            INSTANCE, known=known, asg=group, lifecycle_state=state, state=ec2_state if known else None, market=market
        ),
        membership=membership,
        command=command,
        detach=detach,
    )


def member(reported_at: datetime, name: str = "ip-10-0-1-5.ec2.internal") -> NodeRecord:
    return NodeRecord(instance_id=INSTANCE, node_name=name, asg_name=NODES_ASG, ready=True, reported_at=reported_at)


def kinds(plan) -> list[str]:
    return [type(a).__name__ for a in plan.actions]


NOW = T0 + timedelta(seconds=5)


# -- Spot warning -----------------------------------------------------------------------------------------------


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


@pytest.mark.parametrize("action", [InstanceAction.STOP, InstanceAction.HIBERNATE])
def test_stop_and_hibernate_are_never_detached(action):
    plan = decide(spot(action), NOW, settings(), world())
    assert kinds(plan) == ["RecordCommand", "SendCommand", "Skip"]
    assert plan.actions[2] == Skip("early_replacement", SkipReason.INSTANCE_COMES_BACK)


@pytest.mark.parametrize(
    ("role_tag", "reason"),
    [
        ("k8s.io/role/master", SkipReason.CONTROL_PLANE),
        ("k8s.io/role/control-plane", SkipReason.CONTROL_PLANE),
        (None, SkipReason.UNKNOWN_ROLE),
    ],
)
def test_masters_and_unknown_roles_are_drained_but_not_detached(role_tag, reason):
    plan = decide(spot(), NOW, settings(), world(group=asg(MASTER_ASG, role_tag=role_tag)))
    assert kinds(plan) == ["RecordCommand", "SendCommand", "Skip"]
    assert plan.actions[2] == Skip("early_replacement", reason)


def test_early_replacement_can_be_turned_off():
    plan = decide(spot(), NOW, settings(early_replacement=False), world())
    assert kinds(plan) == ["RecordCommand", "SendCommand", "Skip"]
    assert plan.actions[2].reason is SkipReason.EARLY_REPLACEMENT_DISABLED


@pytest.mark.parametrize("state", ["Terminating", "Terminating:Wait", "Pending", "Standby", "Detaching"])
def test_instances_not_in_service_are_not_detached(state):
    plan = decide(spot(), NOW, settings(), world(state=state))
    assert kinds(plan) == ["RecordCommand", "SendCommand", "Skip"]
    assert plan.actions[2].reason is SkipReason.NOT_IN_SERVICE


# -- late, foreign, unknown ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("notice", "age", "late"),
    [
        (spot(), 120, False),
        (spot(), 121, True),
        (spot(), 300, True),
        (rebalance(), 600, False),
        (rebalance(), 601, True),
    ],
)
def test_late_events_are_acknowledged(notice, age, late):
    plan = decide(notice, T0 + timedelta(seconds=age), settings(rebalance_drain_timeout_seconds=600), world())
    if late:
        assert plan.actions == (Acknowledge(IgnoreReason.LATE, f"event is {age} s old"),)
        assert plan.acknowledged is not None
    else:
        assert plan.acknowledged is None


@pytest.mark.parametrize(
    ("facts", "reason"),
    [
        (
            InstanceFacts(INSTANCE, asg=asg(cluster="other.k8s.local"), lifecycle_state="InService"),
            IgnoreReason.OTHER_CLUSTER,
        ),
        (InstanceFacts(INSTANCE, asg=asg(cluster=None), lifecycle_state="InService"), IgnoreReason.UNMANAGED_GROUP),
        (InstanceFacts(INSTANCE, known=True, asg=None, lifecycle_state=None), IgnoreReason.NOT_IN_ASG),
        (InstanceFacts(INSTANCE, known=False, asg=None, lifecycle_state=None), IgnoreReason.UNKNOWN_INSTANCE),
    ],
)
@pytest.mark.parametrize("notice", [spot(), spot(InstanceAction.STOP), rebalance()])
def test_out_of_scope_instances_are_acknowledged(facts, reason, notice):
    plan = decide(notice, NOW, settings(rebalance_policy=RebalancePolicy.DRAIN), World(instance=facts))
    assert len(plan.actions) == 1
    assert isinstance(plan.actions[0], Acknowledge) and plan.actions[0].reason is reason
    assert INSTANCE in plan.actions[0].detail


def test_other_cluster_detail_names_the_owner():
    facts = InstanceFacts(INSTANCE, asg=asg(cluster="other.k8s.local"), lifecycle_state="InService")
    plan = decide(spot(), NOW, settings(), World(instance=facts))
    assert "other.k8s.local" in plan.actions[0].detail


# -- rebalance recommendation -------------------------------------------------------------------------------


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


# -- duplicates and crash recovery --------------------------------------------------------------------------


def recorded(command: Command, status: str) -> dict:
    return {"command": command.model_dump(mode="json"), "status": status}


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


# -- invariants over every combination ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "role_tag", "early", "state"),
    list(
        itertools.product(
            list(InstanceAction),
            [NODE_ROLE_TAG, "k8s.io/role/master", None],
            [True, False],
            ["InService", "Terminating:Wait"],
        )
    ),
)
def test_detach_happens_only_for_terminate_on_in_service_workers_with_the_setting_on(action, role_tag, early, state):
    group = asg(role_tag=role_tag)
    plan = decide(spot(action), NOW, settings(early_replacement=early), world(group=group, state=state))
    detaches = [a for a in plan.actions if isinstance(a, (RecordDetach, DetachInstance))]
    allowed = action is InstanceAction.TERMINATE and role_tag == NODE_ROLE_TAG and early and state == "InService"
    assert bool(detaches) == allowed
    # the drain command always comes first, before any detach
    assert isinstance(plan.actions[0], RecordCommand) and isinstance(plan.actions[1], SendCommand)
    if allowed:
        assert kinds(plan)[2:] == ["RecordDetach", "DetachInstance", "MarkDetached"]
