"""Whole sequences through both sides at once, compared answer by answer: one transcript of calls, and the Lambdas'
readers (``lambdas.refresher.gather.read_groups``, ``lambdas.interruption.gather.read_instance_facts``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from adapters.aws.ports import Membership
from core.kops import Role, managed_group
from lambdas.interruption.gather import read_instance_facts
from lambdas.refresher.gather import GatherMemo, read_groups
from tests.unit.sim.aws_contract.sides import CLUSTER, GROUP, UNKNOWN, Side, moto_side, outcome, sim_side


def test_one_transcript_on_both_sides(monkeypatch: pytest.MonkeyPatch):
    """The same sequence of calls through both implementations gives the same answers, one by one (instance ids
    named by their place in the group, which differs only in the random ids)."""

    def transcript(side: Side) -> list[Any]:
        first, second = side.instances()
        names = {first: "first", second: "second"}

        def named(value: Any) -> Any:
            if isinstance(value, Membership):
                return (value.asg_name, value.lifecycle_state)
            if isinstance(value, dict):
                return sorted((names.get(k, k), named(v)) for k, v in value.items())
            return names.get(value, value) if isinstance(value, str) else value

        steps: list[Callable[[], Any]] = [
            lambda: side.aws.autoscaling.membership(first),
            lambda: side.aws.autoscaling.group_names([first, second, UNKNOWN]),
            lambda: side.aws.autoscaling.set_capacity(GROUP, 5, None),
            lambda: side.aws.autoscaling.set_capacity(GROUP, None, 3),
            # (no scale-in: which instance it takes is AWS's choice, at random among equals)
            lambda: side.aws.autoscaling.terminate_in_group(UNKNOWN, True),
            lambda: side.aws.autoscaling.terminate_in_group(first, True),
            lambda: side.aws.autoscaling.terminate_in_group(second, True),
            lambda: side.aws.autoscaling.detach_instance(second, GROUP),
            lambda: side.aws.autoscaling.detach_instance(second, GROUP),
            lambda: side.aws.ec2.instance_known(second),
            lambda: side.aws.ec2.terminate([UNKNOWN]),
            lambda: side.aws.queue.receive(0, 0, 30),
        ]
        answers = []
        for step in steps:
            kind, value = outcome(step)
            answers.append((kind, named(value)))
            side.settle()
        return answers

    expected = transcript(sim_side())
    with moto_side(monkeypatch) as moto:
        assert transcript(moto) == expected
    assert expected[6] == ("AwsRequestError", "ValidationError")  # the decrement at MinSize


def test_the_refreshers_reader_sees_the_same_groups(monkeypatch: pytest.MonkeyPatch):
    """``lambdas.refresher.gather.read_groups`` (DescribeAutoScalingGroups, DescribeInstances, DescribeLaunchTemplates
    through the ports) builds the same ``GroupFacts`` from both sides, instance ids and launch times aside."""

    def facts(side: Side) -> list[Any]:
        side.new_template_version()
        groups = read_groups(side.aws.autoscaling, side.aws.ec2, CLUSTER, GatherMemo(), with_launch_facts=True)
        out = []
        for group in groups.values():
            assert all(i.launch_time is not None for i in group.instances)
            anonymous = tuple(replace(i, instance_id="", launch_time=None) for i in group.instances)
            out.append(replace(group, instances=anonymous))
        return out

    expected = facts(sim_side())
    with moto_side(monkeypatch) as moto:
        assert facts(moto) == expected
    [group] = expected
    assert (group.role, group.instance_group, group.launch_template_version) == (Role.NODE, "nodes-us-east-1a", "2")


def test_the_interruption_lambdas_reader_sees_the_same_instances(monkeypatch: pytest.MonkeyPatch):
    """``lambdas.interruption.gather.read_instance_facts`` (DescribeAutoScalingInstances, DescribeInstances,
    DescribeAutoScalingGroups) for a member, a detached instance (with the group its record names) and an unknown
    id: the same facts from both sides (the group compared by what the Lambda reads of it)."""

    def facts(side: Side) -> list[Any]:
        first, second = side.instances()
        side.aws.autoscaling.detach_instance(second, GROUP)
        side.settle()
        out = []
        for instance_id, recorded in ((first, None), (second, GROUP), (UNKNOWN, None)):
            seen = read_instance_facts(side.aws.autoscaling, side.aws.ec2, instance_id, recorded)
            group = None
            if seen.asg is not None:
                group = (
                    seen.asg["AutoScalingGroupName"],
                    seen.asg["DesiredCapacity"],
                    managed_group(seen.asg, CLUSTER),
                )
            out.append((seen.known, seen.lifecycle_state, seen.state, seen.market, group, seen.in_asg))
        return out

    expected = facts(sim_side())
    with moto_side(monkeypatch) as moto:
        assert facts(moto) == expected
    assert [f[:4] for f in expected] == [
        (True, "InService", "running", ""),
        (True, None, "running", ""),
        (False, None, None, ""),
    ]
