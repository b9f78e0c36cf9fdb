"""A moto account with one kOps-tagged worker group ``nodes`` (cluster ``demo``: MinSize 1, MaxSize 3, desired 2)
and the state table, and the refresher's ``Deps`` over it; shared by the refresher's unit tests that advance a run
against moto."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState
from core.schema import state_table
from core.settings import RefresherSettings
from lambdas.common.telemetry import Telemetry
from lambdas.refresher.handler import Deps

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
RUN_ID = "20240305T100000Z-abcdef"
REGION = "us-east-1"
SETTINGS = RefresherSettings(
    cluster_name="demo", table_name="state", queue_url="q", poll_seconds=0.01, event_wait_poll_seconds=0.01
)


class Counting(Telemetry):
    """Telemetry that also remembers the names it counted."""

    def __init__(self) -> None:
        super().__init__(Metrics(namespace="Test", service="refresher"))
        self.counted: list[str] = []

    def count(self, name: str, value: int = 1) -> None:
        self.counted.append(name)
        super().count(name, value)

    def count_by(self, name: str, dimension: str, value: str) -> None:
        self.counted.append(f"{name}:{value}")
        super().count_by(name, dimension, value)


@dataclass
class Cluster:
    autoscaling: Any
    new_deps: Callable[[], Deps]
    telemetry: Counting = field(default_factory=Counting)

    def sizes(self) -> tuple[int, int]:
        (group,) = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["nodes"])["AutoScalingGroups"]
        return group["DesiredCapacity"], group["MaxSize"]

    def instances(self) -> list[str]:
        (group,) = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["nodes"])["AutoScalingGroups"]
        return [i["InstanceId"] for i in group["Instances"]]

    def tag_as_kops_workers(self) -> None:
        """Tag the group as kOps tags a worker instance group (role node, instance group ``nodes``), so a refresh
        plans its instances."""
        tags = {"k8s.io/role/node": "1", "kops.k8s.io/instancegroup": "nodes"}
        self.autoscaling.create_or_update_tags(
            Tags=[
                {
                    "ResourceId": "nodes",
                    "ResourceType": "auto-scaling-group",
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                }
                for k, v in tags.items()
            ]
        )


def surging_run(instance_id: str, original_desired: int = 2, original_max: int = 3, raised: int = 1) -> Run:
    """A run whose one step (replacing ``instance_id`` of ``nodes``) is surging: the group raised by ``raised``."""
    return Run(
        run_id=RUN_ID,
        cluster="demo",
        options=RunOptions(max_surge=100),
        created_at=T0,
        updated_at=T0,
        groups=[
            GroupSurge(
                name="nodes",
                role="node",
                min_size=1,
                original_desired=original_desired,
                original_max=original_max,
                raised=raised,
            )
        ],
        steps=[RunStep(index=0, group="nodes", role="node", instance_id=instance_id, state=StepState.SURGING)],
    )


def pending_run(instance_id: str, original_desired: int = 2, original_max: int = 3) -> Run:
    """A run whose one step (replacing ``instance_id`` of ``nodes``) has not started: its next pass surges."""
    run = surging_run(instance_id, original_desired, original_max, raised=0)
    run.steps[0].state = StepState.PENDING
    return run


@contextmanager
def moto_cluster(monkeypatch: pytest.MonkeyPatch, settings: RefresherSettings = SETTINGS) -> Iterator[Cluster]:
    """The account for the life of the ``with`` block; ``Cluster.new_deps()`` builds a ``Deps`` (clock fixed at T0,
    no sleeping) with clients of its own, as a separate invocation would have."""
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        boto3.resource("dynamodb", region_name=REGION).create_table(**state_table("state"))
        ec2.create_launch_template(LaunchTemplateName="kops", LaunchTemplateData={"ImageId": "ami-0123456789abcdef0"})
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName="nodes",
            LaunchTemplate={"LaunchTemplateName": "kops"},
            MinSize=1,
            MaxSize=3,
            DesiredCapacity=2,
            VPCZoneIdentifier=ec2.describe_subnets()["Subnets"][0]["SubnetId"],
            Tags=[{"Key": "KubernetesCluster", "Value": "demo", "PropagateAtLaunch": True}],
        )
        telemetry = Counting()

        def new_deps() -> Deps:
            deps = Deps.from_clients(
                settings,
                dynamodb=boto3.resource("dynamodb", region_name=REGION),
                autoscaling=boto3.client("autoscaling", region_name=REGION),
                ec2=boto3.client("ec2", region_name=REGION),
                sqs=boto3.client("sqs", region_name=REGION),
                clock=lambda: T0,
                sleep=lambda s: None,
            )
            deps.telemetry = telemetry
            return deps

        yield Cluster(autoscaling, new_deps, telemetry)
