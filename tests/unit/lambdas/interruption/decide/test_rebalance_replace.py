"""REBALANCE_POLICY=replace (rule 5c): which recommendation starts or joins a replacement run, and the cordon that
stays as the fallback whatever happens. Pure decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from core.kops import MASTER_ROLE_TAGS
from core.model import CommandKind
from core.runs import (
    REBALANCE_TRIGGER,
    DrainTimeoutPolicy,
    Run,
    RunStatus,
    StepState,
)
from core.settings import RebalancePolicy
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import (
    JoinReplacement,
    RecordCommand,
    Skip,
    SkipReason,
    StartReplacement,
    TightenCommand,
)
from tests.unit.lambdas.interruption.decision_world import (
    INSTANCE,
    MASTER_ASG,
    NODES_ASG,
    NOW,
    OTHER,
    T0,
    active_run,
    asg,
    kinds,
    member,
    rebalance,
    settings,
    spot,
    world,
)
from tests.unit.lambdas.interruption.decision_world import command_item as item


def replace_settings(**overrides):
    return settings(rebalance_policy=RebalancePolicy.REPLACE, **overrides)


def test_no_run_active_starts_a_one_instance_run_before_the_cordon() -> None:
    w = replace(world(membership=member(T0)), active_run=None)
    plan = decide(rebalance(), NOW, replace_settings(rebalance_drain_timeout_seconds=900), w)
    assert kinds(plan) == ["StartReplacement", "RecordCommand", "SendCommand"]
    start = plan.actions[0]
    assert isinstance(start, StartReplacement)
    run = start.run
    assert run.options.trigger == REBALANCE_TRIGGER and run.options.max_surge == 1
    assert run.options.drain_timeout_seconds == 900 and run.options.drain_timeout_policy is DrainTimeoutPolicy.PAUSE
    assert [(s.instance_id, s.group, s.state, s.node_name) for s in run.steps] == [
        (INSTANCE, NODES_ASG, StepState.PENDING, "ip-10-0-1-5.ec2.internal")
    ]
    # the group as DescribeAutoScalingGroups said it (the refresher reads the sizes again before its surge)
    assert [(g.name, g.min_size, g.original_desired, g.original_max) for g in run.groups] == [(NODES_ASG, 1, 2, 4)]
    assert run.run_id.startswith("20240305T101530Z-") and run.status is RunStatus.RUNNING
    cordon = plan.actions[1]
    assert isinstance(cordon, RecordCommand) and cordon.command.kind is CommandKind.CORDON
    assert cordon.command.options.uncordon_after_seconds == 1800  # the fallback is given back as under "cordon"


def test_the_same_event_names_the_same_run_and_another_event_another() -> None:
    first = decide(rebalance("ev-2"), NOW, replace_settings(), world()).actions[0]
    again = decide(rebalance("ev-2"), NOW + timedelta(seconds=30), replace_settings(), world()).actions[0]
    other = decide(rebalance("ev-3"), NOW, replace_settings(), world()).actions[0]
    assert isinstance(first, StartReplacement) and isinstance(again, StartReplacement)
    assert isinstance(other, StartReplacement)
    assert first.run.run_id == again.run.run_id != other.run.run_id


@pytest.mark.parametrize(
    ("group", "reason"),
    [
        (asg(MASTER_ASG, role_tag=MASTER_ROLE_TAGS[1]), SkipReason.CONTROL_PLANE),
        (asg(role_tag=None), SkipReason.UNKNOWN_ROLE),
    ],
)
def test_a_control_plane_node_or_unknown_role_is_never_replaced_only_cordoned(group: dict, reason: SkipReason) -> None:
    plan = decide(rebalance(), NOW, replace_settings(), world(group=group))
    assert kinds(plan) == ["Skip", "RecordCommand", "SendCommand"]
    skip = plan.actions[0]
    assert isinstance(skip, Skip) and skip.reason is reason and skip.step == "replacement"


def test_an_instance_its_group_is_not_keeping_in_service_is_only_cordoned() -> None:
    plan = decide(rebalance(), NOW, replace_settings(), world(state="Terminating:Wait"))
    skip = plan.actions[0]
    assert isinstance(skip, Skip) and skip.reason is SkipReason.NOT_IN_SERVICE
    assert kinds(plan)[1:] == ["RecordCommand", "SendCommand"]


@pytest.mark.parametrize(
    "run",
    [
        active_run(trigger="schedule"),  # a refresh
        active_run(trigger="manual"),
        active_run(status=RunStatus.PAUSING),  # a replacement run that is stopping takes nothing new
    ],
)
def test_another_run_active_falls_back_to_the_cordon_with_the_reason(run: Run) -> None:
    plan = decide(rebalance(), NOW, replace_settings(rebalance_replace_limit=5), replace(world(), active_run=run))
    assert kinds(plan) == ["Skip", "RecordCommand", "SendCommand"]
    skip = plan.actions[0]
    assert isinstance(skip, Skip) and skip.reason is SkipReason.RUN_ACTIVE and run.run_id in skip.describe()


def test_at_the_limit_the_recommendation_is_only_cordoned() -> None:
    run = active_run()  # one step in flight
    plan = decide(rebalance(), NOW, replace_settings(), replace(world(), active_run=run))  # limit 1 (default)
    skip = plan.actions[0]
    assert isinstance(skip, Skip) and skip.reason is SkipReason.REPLACE_LIMIT
    assert kinds(plan)[1:] == ["RecordCommand", "SendCommand"]


def test_under_the_limit_the_instance_joins_the_replacement_run() -> None:
    run = active_run(steps=((OTHER, StepState.SURGING), ("i-0eeeeeeeeeeeeeeee", StepState.DONE)))
    plan = decide(rebalance(), NOW, replace_settings(rebalance_replace_limit=2), replace(world(), active_run=run))
    assert kinds(plan) == ["JoinReplacement", "RecordCommand", "SendCommand"]
    join = plan.actions[0]
    assert isinstance(join, JoinReplacement)
    assert join.run_id == run.run_id and join.limit == 2 and join.group is None  # the run holds the group already
    assert join.step.instance_id == INSTANCE and join.step.index == 2 and join.step.state is StepState.PENDING


def test_joining_from_another_group_brings_the_group_along() -> None:
    run = active_run(group="nodes-us-east-1b.demo.k8s.local")
    plan = decide(rebalance(), NOW, replace_settings(rebalance_replace_limit=3), replace(world(), active_run=run))
    join = plan.actions[0]
    assert isinstance(join, JoinReplacement) and join.group is not None and join.group.name == NODES_ASG


def test_an_instance_the_run_already_replaces_is_not_added_twice() -> None:
    run = active_run(steps=((INSTANCE, StepState.DRAINING),))
    plan = decide(rebalance(), NOW, replace_settings(rebalance_replace_limit=3), replace(world(), active_run=run))
    skip = plan.actions[0]
    assert isinstance(skip, Skip) and skip.reason is SkipReason.ALREADY_REPLACING


def test_a_second_recommendation_while_the_first_holds_the_node_starts_nothing() -> None:
    w = replace(world(), commands=(item("rebalance-ev-1", "cordon", "succeeded"),))
    plan = decide(rebalance("ev-9"), NOW, replace_settings(), w)
    assert kinds(plan) == ["Acknowledge"]


def test_other_policies_never_start_a_run() -> None:
    for policy in (RebalancePolicy.CORDON, RebalancePolicy.DRAIN):
        plan = decide(rebalance(), NOW, settings(rebalance_policy=policy), world())
        assert not any(isinstance(a, StartReplacement | JoinReplacement) for a in plan.actions)


def test_a_duplicate_whose_cordon_is_recorded_starts_nothing_again() -> None:
    recorded = item("rebalance-ev-2", "cordon", "succeeded")
    plan = decide(rebalance("ev-2"), NOW, replace_settings(), world(command=recorded))
    assert not any(isinstance(a, StartReplacement | JoinReplacement) for a in plan.actions)


def test_a_spot_warning_while_the_run_drains_the_node_tightens_that_drain() -> None:
    draining = item("refresh-r1-0", "drain", "running", quiet=None, reason="rebalance-replace r1 step 0")
    cordon = item("rebalance-ev-2", "cordon", "succeeded")
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(draining, cordon)))
    tighten = plan.actions[0]
    assert isinstance(tighten, TightenCommand) and tighten.command_id == "refresh-r1-0"
    assert tighten.deadline == T0 + timedelta(seconds=120)  # one drain, with the Spot deadline
    assert "ResolveCordon" in kinds(plan)  # the rebalance cordon is never given back


def test_a_spot_warning_while_the_run_waits_for_its_spare_escalates_the_cordon_to_a_drain() -> None:
    cordon = item("rebalance-ev-2", "cordon", "succeeded")
    plan = decide(spot(), NOW, settings(), replace(world(), commands=(cordon,)))
    drain = plan.actions[0]
    assert isinstance(drain, RecordCommand) and drain.command.kind is CommandKind.DRAIN
    assert "ResolveCordon" in kinds(plan)


@pytest.mark.parametrize(
    ("state", "detached"),
    [(StepState.SURGING, False), (StepState.DRAINING, False), (StepState.PENDING, True), (StepState.DONE, True)],
)
def test_a_spot_warning_for_an_instance_the_run_is_replacing_gets_no_early_detach(
    state: StepState, detached: bool
) -> None:
    run = active_run(steps=((INSTANCE, state),))
    plan = decide(spot(), NOW, replace_settings(), replace(world(), active_run=run))
    assert ("DetachInstance" in kinds(plan)) is detached
    if not detached:
        skip = next(a for a in plan.actions if isinstance(a, Skip) and a.step == "early_replacement")
        assert skip.reason is SkipReason.ALREADY_REPLACING and run.run_id in skip.describe()
    assert kinds(plan)[:2] == ["RecordCommand", "SendCommand"]  # the Spot drain as always


@pytest.mark.parametrize("status", ["succeeded", "failed", "timed_out", "skipped"])
def test_a_recommendation_after_the_spot_warning_drained_the_node_replaces_nothing(status: str) -> None:
    """AWS may send the recommendation with the two-minute warning or after it, and EventBridge keeps no order: the
    warning's drain may be over when the recommendation is decided. The instance is going whatever: Auto Scaling
    replaces it once Spot reclaims it (or the warning's early detach did), so a replacement run would launch a second
    instance for the one warning, and a rebalance cordon a quiet period for a node that is ending."""
    warned = item("spot-ev-1", "drain", status, quiet=None, reason="spot-interruption:terminate")
    w = replace(world(), commands=(warned,), active_run=None)
    plan = decide(rebalance("ev-2"), NOW, replace_settings(), w)
    assert not any(isinstance(a, StartReplacement | JoinReplacement | RecordCommand) for a in plan.actions)
    assert plan.acknowledged is not None
