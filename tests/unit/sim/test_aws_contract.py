"""Contract: the simulation's Auto Scaling, EC2 and SQS (``sim.aws.SimAws``) answer the product's calls as the real
adapters (``adapters.aws.gateway.AwsGateway``) answer them on moto: the same values and the same exception types
and codes, for every call of the ports.

Each test runs on both sides (``side`` is parametrised); ``test_one_transcript_on_both_sides`` also compares a whole
sequence of calls answer by answer. moto runs with ``localworld.aws_rules.strict_auto_scaling()``, which makes it
refuse what AWS refuses and moto 5.2 accepts (a decrement at MinSize, a desired capacity outside the sizes, a
terminate of an id no group holds). Where moto is still wrong about AWS the test says so and holds the simulation to
AWS's documentation instead:

- CompleteLifecycleAction / RecordLifecycleActionHeartbeat: moto does not implement them (HTTP 500 from its server,
  ``NotImplementedError`` in process; FACTS.md);
- UpdateAutoScalingGroup with MaxSize below MinSize: moto accepts it (AWS: ``ValidationError``);
- DescribeLaunchTemplates of an unknown id: moto answers nothing (AWS: ``InvalidLaunchTemplateId.NotFound``);
- ChangeMessageVisibility of a message no longer in flight: moto accepts it (AWS: ``MessageNotInflight``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.aws.autoscaling import AutoScaling
from adapters.aws.gateway import AwsGateway
from adapters.aws.ports import Membership
from core.exceptions import AwsRequestError, AwsUnavailableError
from core.kops import Role, managed_group
from core.lifecycle import LifecycleAction
from core.model import Command, CommandKind
from lambdas.interruption.gather import read_instance_facts
from lambdas.refresher.gather import read_groups
from localworld.aws_rules import strict_auto_scaling, terminates_refused
from sim.aws import SimAws
from sim.aws_state import TerminationHook, kops_tags
from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel
from tests.unit.adapters.aws.test_calls import Raising, client_error

REGION = "us-east-1"
ZONE = "us-east-1a"
CLUSTER = "demo"
GROUP = "nodes-us-east-1a.demo"
UNKNOWN = "i-0123456789abcdef0"
TOKEN = "87654321-4321-4321-4321-210987654321"


@dataclass
class Side:
    """One implementation of the ports, with what a test needs to drive it.

    Attributes:
        aws: ``.autoscaling``, ``.ec2``, ``.queue`` (the ports).
        settle: let AWS act on what was asked (the simulation runs its clock; moto acts at once).
        new_template_version: CreateLaunchTemplateVersion on the group's template.
        dead_letters: how many messages the dead-letter queue holds.
        terminates_refused: a ``with`` block in which Auto Scaling refuses TerminateInstanceInAutoScalingGroup with
            ``ScalingActivityInProgress`` (moto: ``localworld.aws_rules.terminates_refused``; the simulation: a
            ``FaultWindow`` on that operation, as ``sim.schedules.API_FAULTS`` draws it).
    """

    name: str
    aws: Any
    template_id: str
    settle: Callable[[], None]
    new_template_version: Callable[[], object]
    dead_letters: Callable[[], int]
    terminates_refused: Callable[[], AbstractContextManager[None]]

    def instances(self) -> list[str]:
        group = self.aws.autoscaling.describe_group(GROUP)
        return [str(i["InstanceId"]) for i in group["Instances"]]


@contextmanager
def moto_side(monkeypatch: pytest.MonkeyPatch) -> Iterator[Side]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws(), strict_auto_scaling():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        template = ec2.create_launch_template(
            LaunchTemplateName=GROUP,
            LaunchTemplateData={"ImageId": "ami-0123456789abcdef0", "InstanceType": "m5.large"},
        )["LaunchTemplate"]["LaunchTemplateId"]
        subnet = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": [ZONE]}])["Subnets"][0]
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=GROUP,
            LaunchTemplate={"LaunchTemplateId": template, "Version": "$Latest"},
            MinSize=1,
            MaxSize=3,
            DesiredCapacity=2,
            VPCZoneIdentifier=subnet["SubnetId"],
            Tags=[
                {
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                    "ResourceId": GROUP,
                    "ResourceType": "auto-scaling-group",
                }
                for k, v in kops_tags(CLUSTER, "nodes-us-east-1a", control_plane=False).items()
            ],
        )
        dlq = sqs.create_queue(QueueName="commands-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue = sqs.create_queue(
            QueueName="commands",
            Attributes={"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "3"})},
        )["QueueUrl"]

        def new_version() -> None:
            ec2.create_launch_template_version(
                LaunchTemplateId=template, LaunchTemplateData={"InstanceType": "m5.xlarge"}
            )

        def dead_letters() -> int:
            out = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, VisibilityTimeout=0)
            return len(out.get("Messages", []))

        yield Side(
            "moto",
            AwsGateway.from_clients(autoscaling, ec2, sqs, queue),
            template,
            settle=lambda: None,
            new_template_version=new_version,
            dead_letters=dead_letters,
            terminates_refused=terminates_refused,
        )


def sim_world(hooks: tuple[TerminationHook, ...] = ()) -> tuple[Kernel, Faults, SimAws, list[dict[str, Any]]]:
    kernel = Kernel(7)
    faults = Faults(kernel)
    events: list[dict[str, Any]] = []
    aws = SimAws(kernel, faults, events.append, region=REGION)
    aws.cloud.add_group(
        GROUP,
        cluster=CLUSTER,
        instance_group="nodes-us-east-1a",
        zones=(ZONE,),
        min_size=1,
        max_size=3,
        desired=2,
        spot=False,
        hooks=hooks,
    )
    aws.start()
    return kernel, faults, aws, events


def sim_side() -> Side:
    kernel, faults, aws, _ = sim_world()
    template = next(iter(aws.cloud.templates))

    @contextmanager
    def refused() -> Iterator[None]:
        window = FaultWindow(
            "autoscaling", "TerminateInstanceInAutoScalingGroup", kernel.t, kernel.t + 3600, "ScalingActivityInProgress"
        )
        faults.add(window)
        try:
            yield
        finally:
            faults.windows.remove(window)

    return Side(
        "sim",
        aws,
        template,
        settle=lambda: kernel.run(kernel.t + 300),
        new_template_version=lambda: aws.cloud.new_template_version(template),
        dead_letters=lambda: len(aws.queue.dead_letters),
        terminates_refused=refused,
    )


@pytest.fixture(params=["moto", "sim"])
def side(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Side]:
    if request.param == "sim":
        yield sim_side()
        return
    with moto_side(monkeypatch) as moto:
        yield moto


def outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", the answer) or (the exception's type name, its AWS code)."""
    try:
        return ("ok", fn())
    except (AwsRequestError, AwsUnavailableError) as err:
        return (type(err).__name__, err.code)


def command(instance_id: str, n: int = 1) -> Command:
    return Command(
        command_id=f"spot-{n}",
        cluster=CLUSTER,
        kind=CommandKind.DRAIN,
        instance_id=instance_id,
        deadline=datetime(2030, 1, 1, tzinfo=UTC) + timedelta(minutes=n),
    )


# -- Auto Scaling look-ups ----------------------------------------------------------------------------------------


def test_the_group_as_the_product_reads_it(side: Side):
    group = side.aws.autoscaling.describe_group(GROUP)
    assert (group["AutoScalingGroupName"], group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (
        GROUP,
        1,
        3,
        2,
    )
    assert group["AvailabilityZones"] == [ZONE]
    assert group["LaunchTemplate"] == {
        "LaunchTemplateId": side.template_id,
        "LaunchTemplateName": GROUP,
        "Version": "$Latest",
    }
    assert [(i["AvailabilityZone"], i["LifecycleState"], i["HealthStatus"]) for i in group["Instances"]] == [
        (ZONE, "InService", "Healthy")
    ] * 2
    assert {i["LaunchTemplate"]["Version"] for i in group["Instances"]} == {"1"}
    tags = {t["Key"]: (t["Value"], t["PropagateAtLaunch"], t["ResourceId"]) for t in group["Tags"]}
    assert tags["KubernetesCluster"] == (CLUSTER, True, GROUP)
    assert tags["kops.k8s.io/instancegroup"] == ("nodes-us-east-1a", True, GROUP)
    assert side.aws.autoscaling.describe_group("no-such-group") is None


def test_the_cluster_groups_and_memberships(side: Side):
    assert [g["AutoScalingGroupName"] for g in side.aws.autoscaling.cluster_groups(CLUSTER)] == [GROUP]
    assert side.aws.autoscaling.cluster_groups("other") == []
    first, second = side.instances()
    assert side.aws.autoscaling.membership(first) == Membership(GROUP, "InService")
    assert side.aws.autoscaling.membership(UNKNOWN) is None
    assert side.aws.autoscaling.group_names([first, UNKNOWN, second]) == {first: GROUP, second: GROUP}
    many = [f"i-{n:017x}" for n in range(120)] + [first]  # three DescribeAutoScalingInstances calls of <= 50 ids
    assert side.aws.autoscaling.group_names(many) == {first: GROUP}


# -- Auto Scaling effects -----------------------------------------------------------------------------------------


def test_capacity_outside_the_sizes_is_refused(side: Side):
    assert outcome(lambda: side.aws.autoscaling.set_capacity(GROUP, 4, None)) == ("AwsRequestError", "ValidationError")
    assert outcome(lambda: side.aws.autoscaling.set_capacity(GROUP, 0, None)) == ("AwsRequestError", "ValidationError")
    assert outcome(lambda: side.aws.autoscaling.set_capacity("no-such-group", 1, None)) == (
        "AwsRequestError",
        "ValidationError",
    )
    side.aws.autoscaling.set_capacity(GROUP, 4, 4)  # MaxSize first in effect: one call carries both
    group = side.aws.autoscaling.describe_group(GROUP)
    assert (group["MaxSize"], group["DesiredCapacity"]) == (4, 4)


def test_a_max_size_below_the_desired_capacity_lowers_it(side: Side):
    side.aws.autoscaling.set_capacity(GROUP, None, 1)
    group = side.aws.autoscaling.describe_group(GROUP)
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (1, 1, 1)


def test_terminate_with_decrement_stops_at_min_size(side: Side):
    first, second = side.instances()
    assert side.aws.autoscaling.terminate_in_group(first, decrement=True) is True
    side.settle()
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 1
    assert side.instances() == [second]
    assert outcome(lambda: side.aws.autoscaling.terminate_in_group(second, decrement=True)) == (
        "AwsRequestError",
        "ValidationError",
    )
    assert side.aws.autoscaling.terminate_in_group(UNKNOWN, decrement=False) is False
    assert side.aws.autoscaling.terminate_in_group(first, decrement=False) is False  # gone already
    assert side.aws.ec2.describe_instance(first).state in ("shutting-down", "terminated")


def test_a_terminate_auto_scaling_refuses_is_an_error_and_changes_nothing(side: Side):
    """``ScalingActivityInProgress`` (HTTP 400) is a refusal (``AwsRequestError``, not retryable by the adapter):
    the instance stays in service and the desired capacity is not decremented; once Auto Scaling accepts again, the
    same call goes through."""
    first, second = side.instances()
    with side.terminates_refused():
        assert outcome(lambda: side.aws.autoscaling.terminate_in_group(first, decrement=True)) == (
            "AwsRequestError",
            "ScalingActivityInProgress",
        )
    side.settle()
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 2
    assert side.instances() == [first, second]
    assert side.aws.autoscaling.terminate_in_group(first, decrement=True) is True
    side.settle()
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 1


def test_terminate_without_decrement_is_replaced(side: Side):
    first, second = side.instances()
    assert side.aws.autoscaling.terminate_in_group(first, decrement=False) is True
    side.settle()
    now = side.instances()
    assert len(now) == 2 and second in now and first not in now


def test_detach_leaves_the_instance_running_outside_the_group(side: Side):
    first, _ = side.instances()
    assert side.aws.autoscaling.detach_instance(first, GROUP) is True
    side.settle()
    assert side.aws.autoscaling.membership(first) is None
    assert side.aws.autoscaling.detach_instance(first, GROUP) is False
    assert side.aws.autoscaling.detach_instance(first, "no-such-group") is False
    assert side.aws.ec2.describe_instance(first).state == "running"
    assert len(side.instances()) == 2  # not decremented: a replacement
    assert side.aws.autoscaling.describe_group(GROUP)["DesiredCapacity"] == 2


# -- EC2 ----------------------------------------------------------------------------------------------------------


def test_instances_as_ec2_describes_them(side: Side):
    first, second = side.instances()
    seen = side.aws.ec2.describe_instance(first)
    assert (seen.instance_id, seen.state, seen.lifecycle) == (first, "running", "")
    assert seen.tags["KubernetesCluster"] == CLUSTER
    assert seen.tags["aws:autoscaling:groupName"] == GROUP
    assert seen.tags["aws:ec2launchtemplate:version"] == "1"
    assert side.aws.ec2.instance_known(first) is True
    assert side.aws.ec2.instance_known(UNKNOWN) is False
    assert side.aws.ec2.instance_known("not-an-id") is False
    assert side.aws.ec2.describe_instance(UNKNOWN) is None
    assert set(side.aws.ec2.describe([first, UNKNOWN, second])) == {first, second}
    times = side.aws.ec2.launch_times([first, UNKNOWN])
    assert set(times) == {first} and times[first].tzinfo is not None
    assert side.aws.ec2.launch_times([]) == {}


def test_launch_template_versions(side: Side):
    assert side.aws.ec2.template_versions([side.template_id]) == {side.template_id: ("1", "1")}
    side.new_template_version()
    assert side.aws.ec2.template_versions([side.template_id]) == {side.template_id: ("1", "2")}
    assert side.aws.ec2.template_versions([]) == {}


def test_ec2_terminate(side: Side):
    first, _ = side.instances()
    assert outcome(lambda: side.aws.ec2.terminate([first, UNKNOWN])) == (
        "AwsRequestError",
        "InvalidInstanceID.NotFound",
    )
    assert side.aws.ec2.describe_instance(first).state == "running"  # nothing terminated
    side.aws.ec2.terminate([first])
    side.aws.ec2.terminate([first])  # idempotent
    assert side.aws.ec2.describe_instance(first).state in ("shutting-down", "terminated")


# -- SQS ----------------------------------------------------------------------------------------------------------


def test_a_command_is_delivered_at_least_once_then_deleted(side: Side):
    message_id = side.aws.queue.send_command(command("i-0a1b2c3d4e5f60718"))
    got = side.aws.queue.receive(10, 0, 30)
    assert [(m["MessageId"], m["Attributes"]["ApproximateReceiveCount"]) for m in got] == [(message_id, "1")]
    assert Command.model_validate_json(got[0]["Body"]).command_id == "spot-1"
    assert side.aws.queue.receive(10, 0, 30) == []  # invisible for 30 s
    side.aws.queue.set_visibility(got[0]["ReceiptHandle"], 0)
    again = side.aws.queue.receive(10, 0, 30)
    assert [m["Attributes"]["ApproximateReceiveCount"] for m in again] == ["2"]
    side.aws.queue.delete(again[0]["ReceiptHandle"])
    assert side.aws.queue.receive(10, 0, 0) == []
    assert outcome(lambda: side.aws.queue.receive(11, 0, 30)) == ("AwsRequestError", "InvalidParameterValue")
    assert outcome(lambda: side.aws.queue.delete("bogus")) == ("AwsRequestError", "ReceiptHandleIsInvalid")
    assert outcome(lambda: side.aws.queue.set_visibility("bogus", 5)) == ("AwsRequestError", "ReceiptHandleIsInvalid")


def test_a_message_received_max_receive_count_times_goes_to_the_dead_letter_queue(side: Side):
    side.aws.queue.send_command(command("i-0a1b2c3d4e5f60718"))
    counts = [m["Attributes"]["ApproximateReceiveCount"] for _ in range(4) for m in side.aws.queue.receive(10, 0, 0)]
    assert counts == ["1", "2", "3"]
    assert side.dead_letters() == 1


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


# -- where moto is not AWS ----------------------------------------------------------------------------------------


def test_moto_cannot_complete_a_lifecycle_action(monkeypatch: pytest.MonkeyPatch):
    """moto does not implement CompleteLifecycleAction / RecordLifecycleActionHeartbeat: in process (``mock_aws``) the
    call raises ``NotImplementedError``, its server answers HTTP 500 (FACTS.md). The simulation follows AWS instead
    (the tests below); when moto learns them, this test fails and the comparison can move to both sides."""
    with moto_side(monkeypatch) as moto:
        first, _ = moto.instances()
        action = LifecycleAction(instance_id=first, asg_name=GROUP, hook_name="node-manager-drain", token=TOKEN)
        with pytest.raises(NotImplementedError):
            moto.aws.autoscaling.complete_lifecycle_action(action)
        with pytest.raises(NotImplementedError):
            moto.aws.autoscaling.record_heartbeat(action)


def test_an_action_no_longer_active_is_reported_as_gone_like_the_adapter_does():
    """AWS answers ValidationError "No active Lifecycle Action found with instance ID ..." (API reference,
    CompleteLifecycleAction); the adapter turns it into False, and so does the simulation."""
    err = client_error("ValidationError", f"No active Lifecycle Action found with instance ID {UNKNOWN}")
    action = LifecycleAction(instance_id=UNKNOWN, asg_name=GROUP, hook_name="node-manager-drain", token=TOKEN)
    assert AutoScaling(Raising(err)).complete_lifecycle_action(action) is False
    assert AutoScaling(Raising(err)).record_heartbeat(action) is False
    _, _, aws, _ = sim_world(hooks=(TerminationHook("node-manager-drain"),))
    assert aws.autoscaling.complete_lifecycle_action(action) is False
    assert aws.autoscaling.record_heartbeat(action) is False


def test_a_termination_waits_on_the_hook_until_completed():
    """Terminating:Wait, the event, heartbeats, CompleteLifecycleAction (CONTINUE): "Amazon EC2 Auto Scaling lifecycle
    hooks"."""
    kernel, _, aws, events = sim_world(hooks=(TerminationHook("node-manager-drain", heartbeat_timeout=300),))
    first, _ = list(aws.cloud.groups[GROUP].members)
    assert aws.autoscaling.terminate_in_group(first, decrement=False) is True
    assert aws.autoscaling.membership(first) == Membership(GROUP, "Terminating:Wait")
    [event] = [e for e in events if e["detail-type"] == "EC2 Instance-terminate Lifecycle Action"]
    detail = event["detail"]
    action = LifecycleAction(
        instance_id=first, asg_name=GROUP, hook_name=detail["LifecycleHookName"], token=detail["LifecycleActionToken"]
    )
    kernel.run(250)
    assert aws.autoscaling.record_heartbeat(action) is True
    kernel.run(500)  # past the first heartbeat timeout, within the second
    assert aws.autoscaling.membership(first) == Membership(GROUP, "Terminating:Wait")
    assert aws.ec2.describe_instance(first).state == "running"
    wrong = action.model_copy(update={"token": "11111111-2222-4333-8444-555555555555"})
    assert aws.autoscaling.complete_lifecycle_action(wrong) is False
    assert aws.autoscaling.complete_lifecycle_action(action) is True
    assert aws.autoscaling.complete_lifecycle_action(action) is False  # no longer active
    kernel.run(600)
    assert aws.autoscaling.membership(first) is None
    assert aws.ec2.describe_instance(first).state == "terminated"


def test_a_hook_times_out_into_termination():
    kernel, _, aws, _ = sim_world(hooks=(TerminationHook("node-manager-drain", heartbeat_timeout=300),))
    first, _ = list(aws.cloud.groups[GROUP].members)
    aws.autoscaling.terminate_in_group(first, decrement=False)
    kernel.run(299)
    assert aws.autoscaling.membership(first) == Membership(GROUP, "Terminating:Wait")
    kernel.run(400)
    assert aws.autoscaling.membership(first) is None


def test_rules_moto_does_not_apply(side: Side):
    """MaxSize below MinSize, an unknown launch template, a visibility change of a message not in flight: AWS
    refuses (API references of UpdateAutoScalingGroup, DescribeLaunchTemplates, ChangeMessageVisibility); moto
    accepts, so only the simulation is held to it."""
    below = outcome(lambda: side.aws.autoscaling.set_capacity(GROUP, None, 0))
    unknown = outcome(lambda: side.aws.ec2.template_versions(["lt-0123456789abcdef0"]))
    side.aws.queue.send_command(command("i-0a1b2c3d4e5f60718"))
    [message] = side.aws.queue.receive(10, 0, 0)
    lapsed = outcome(lambda: side.aws.queue.set_visibility(message["ReceiptHandle"], 30))
    if side.name == "moto":
        assert (below, unknown, lapsed[0]) == (("ok", None), ("ok", {}), "ok")
    else:
        assert below == ("AwsRequestError", "ValidationError")
        assert unknown == ("AwsRequestError", "InvalidLaunchTemplateId.NotFound")
        assert lapsed == ("AwsRequestError", "AWS.SimpleQueueService.MessageNotInflight")


# -- faults -------------------------------------------------------------------------------------------------------


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


def test_the_refreshers_reader_sees_the_same_groups(monkeypatch: pytest.MonkeyPatch):
    """``lambdas.refresher.gather.read_groups`` (DescribeAutoScalingGroups, DescribeInstances, DescribeLaunchTemplates
    through the ports) builds the same ``GroupFacts`` from both sides, instance ids and launch times aside."""

    def facts(side: Side) -> list[Any]:
        side.new_template_version()
        groups = read_groups(side.aws.autoscaling, side.aws.ec2, CLUSTER, with_launch_facts=True)
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
