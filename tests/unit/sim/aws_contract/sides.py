"""Contract: the simulation's Auto Scaling, EC2 and SQS (``sim.aws.SimAws``) answer the product's calls as the real
adapters (``adapters.aws.gateway.AwsGateway``) answer them on moto: the same values and the same exception types
and codes, for every call of the ports. This module builds the two sides; the tests are the ``test_*`` files of this
package, one per service, and those of whole transcripts, of injected faults and of where moto is not AWS.

Most tests run on both sides (``side``, parametrised in this package's ``conftest.py``); ``test_transcripts`` also
compares whole sequences of calls answer by answer. moto runs with ``localworld.aws_rules.strict_auto_scaling()``,
which makes it refuse what AWS refuses and moto 5.2 accepts (a decrement at MinSize, a desired capacity outside the
sizes, a terminate of an id no group holds). Where moto is still wrong about AWS the test says so and holds the
simulation to AWS's documentation instead (``test_where_moto_is_not_aws``):

- CompleteLifecycleAction / RecordLifecycleActionHeartbeat: moto does not implement them (HTTP 500 from its server,
  ``NotImplementedError`` in process; FACTS.md);
- UpdateAutoScalingGroup with MaxSize below MinSize: moto accepts it (AWS: ``ValidationError``);
- DescribeLaunchTemplates of an unknown id: moto answers nothing (AWS: ``InvalidLaunchTemplateId.NotFound``);
- ChangeMessageVisibility of a message no longer in flight: moto accepts it (AWS: ``MessageNotInflight``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.aws.gateway import AwsGateway
from core.exceptions import AwsRequestError, AwsUnavailableError
from core.model import Command, CommandKind
from localworld.aws_rules import strict_auto_scaling, terminates_refused
from sim.aws import SimAws
from sim.aws_state import TerminationHook, kops_tags
from sim.faults import Faults, FaultWindow
from sim.kernel import Kernel

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
