"""Rules 1 and 2 of the interruption decision (pure): late notices and instances out of the cluster's scope (another
cluster's, an unmanaged group, no group, an unknown id) are acknowledged without a command."""

from __future__ import annotations

from datetime import timedelta

import pytest

from core.settings import RebalancePolicy
from lambdas.events.event import InstanceAction
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import Acknowledge, IgnoreReason
from lambdas.interruption.world import InstanceFacts, World
from tests.unit.lambdas.interruption.decision_world import INSTANCE, NOW, T0, asg, rebalance, settings, spot, world


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
