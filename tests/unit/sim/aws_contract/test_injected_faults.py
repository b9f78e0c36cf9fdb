"""Injected faults: a fault window raises what the adapter raises for the same AWS error, a lost answer fails the
caller after the effect, and the simulation pays the calls the adapter pays (so a fault fails the same one)."""

from __future__ import annotations

from collections import Counter

import pytest

from adapters.aws.autoscaling import AutoScaling
from core.exceptions import AwsRequestError, AwsUnavailableError
from sim.faults import FaultWindow
from tests.unit.adapters.aws.raising import Raising, client_error
from tests.unit.sim.aws_contract.sides import (
    CLUSTER,
    GROUP,
    UNKNOWN,
    Side,
    command,
    moto_side,
    outcome,
    sim_side,
    sim_world,
)


@pytest.mark.parametrize(
    ("code", "status", "raised"),
    [
        ("Throttling", 400, AwsUnavailableError),
        ("ServiceUnavailable", 503, AwsUnavailableError),
        ("InternalFailure", 500, AwsUnavailableError),
        ("AccessDenied", 403, AwsRequestError),
        ("ScalingActivityInProgress", 400, AwsRequestError),
    ],
)
def test_an_injected_fault_raises_what_the_adapter_raises(code: str, status: int, raised: type[Exception]):
    real = outcome(lambda: AutoScaling(Raising(client_error(code, "x", status))).describe_group(GROUP))
    assert real == (raised.__name__, code)
    kernel, faults, aws, _ = sim_world()
    faults.add(FaultWindow("autoscaling", "DescribeAutoScalingGroups", 0, 60, code))
    faults.add(FaultWindow("ec2", "", 0, 60, code))
    faults.add(FaultWindow("sqs", "ReceiveMessage", 0, 60, code))
    assert outcome(lambda: aws.autoscaling.describe_group(GROUP)) == real
    assert outcome(lambda: aws.ec2.instance_known(UNKNOWN)) == (raised.__name__, code)
    assert outcome(lambda: aws.queue.receive(10, 0, 30)) == (raised.__name__, code)
    assert aws.autoscaling.membership(UNKNOWN) is None  # another operation: not in the window
    with pytest.raises(raised) as info:
        aws.autoscaling.describe_group(GROUP)
    assert info.value.__cause__ is not None
    kernel.run(60)
    assert aws.autoscaling.describe_group(GROUP) is not None  # the window is over


def test_the_same_number_of_calls_per_look_up(monkeypatch: pytest.MonkeyPatch):
    """An injected fault fails one call: the simulation pays the calls the adapter pays (one DescribeAutoScaling
    Instances per 50 ids, one DescribeInstances per 200, none for no ids), counted on moto by botocore's events."""

    def look_ups(side: Side) -> None:
        first, _ = side.instances()
        many = [f"i-{n:017x}" for n in range(450)] + [first]
        side.aws.autoscaling.group_names(many)
        side.aws.ec2.launch_times(many)
        side.aws.ec2.describe([])
        side.aws.autoscaling.cluster_groups(CLUSTER)
        side.aws.ec2.template_versions([side.template_id])

    sim = sim_side()
    look_ups(sim)
    sim_calls = Counter(sim.aws.autoscaling.calls) + Counter(sim.aws.ec2.calls)
    sim_calls["DescribeAutoScalingGroups"] -= 1  # Side.instances()
    with moto_side(monkeypatch) as moto:
        seen: Counter[str] = Counter()
        for client in (moto.aws.autoscaling.client, moto.aws.ec2.client):
            client.meta.events.register("before-call.*.*", lambda model, **_: seen.update([model.name]))
        look_ups(moto)
    seen["DescribeAutoScalingGroups"] -= 1
    assert (
        +seen
        == +sim_calls
        == Counter(
            {
                "DescribeAutoScalingInstances": 10,
                "DescribeInstances": 3,
                "DescribeAutoScalingGroups": 1,
                "DescribeLaunchTemplates": 1,
            }
        )
    )


def test_a_lost_answer_fails_the_caller_after_the_effect():
    """``<service>:lost-answer`` windows: AWS did it, the caller sees the failure (and a retry meets the effect)."""
    kernel, faults, aws, _ = sim_world()
    first, second = list(aws.cloud.groups[GROUP].members)
    faults.add(FaultWindow("autoscaling:lost-answer", "TerminateInstanceInAutoScalingGroup", 0, 60, "InternalFailure"))
    faults.add(FaultWindow("sqs:lost-answer", "SendMessage", 0, 60, "ServiceUnavailable"))
    with pytest.raises(AwsUnavailableError):
        aws.autoscaling.terminate_in_group(first, decrement=True)
    assert aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 1  # done nonetheless
    with pytest.raises(AwsUnavailableError):
        aws.queue.send_command(command(second))
    kernel.run(120)
    assert aws.autoscaling.terminate_in_group(first, decrement=True) is False  # the retry: gone already
    assert aws.queue.send_command(command(second))  # the retry: a second copy of the command
    assert [m["Body"] for m in aws.queue.receive(10, 0, 30)] == [command(second).model_dump_json()] * 2
