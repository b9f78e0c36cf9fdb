"""Rule 4 of the interruption decision, early replacement (pure): only a terminate warning for an InService worker,
with the setting on, detaches the instance; checked rule by rule and over every combination."""

from __future__ import annotations

import itertools

import pytest

from core.kops import NODE_ROLE_TAG
from lambdas.events.event import InstanceAction
from lambdas.interruption.decide import decide
from lambdas.interruption.plan import DetachInstance, RecordCommand, RecordDetach, SendCommand, Skip, SkipReason
from tests.unit.lambdas.interruption.decision_world import MASTER_ASG, NOW, asg, kinds, settings, spot, world


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
