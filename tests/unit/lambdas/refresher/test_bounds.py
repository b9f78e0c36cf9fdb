"""The refresher's capacity bounds and their clamp at execution: a ``RUN#`` item with absurd targets (forged, or
left by a bug) never scales a group past its original MaxSize + the settings' surge limit (moto's Auto Scaling and
DynamoDB; the run advanced by ``advance_run`` as the tick would)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from core.kops import Role
from core.runs import GroupSurge, Run, RunOptions, RunStep, StepState
from core.schema import state_table
from core.settings import RefresherSettings
from lambdas.common.telemetry import Telemetry
from lambdas.refresher import advance
from lambdas.refresher.bounds import capacity_bounds
from lambdas.refresher.handler import Deps
from lambdas.refresher.world import GroupFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
RUN_ID = "20240305T100000Z-abcdef"
SETTINGS = RefresherSettings(cluster_name="demo", table_name="state", queue_url="q", poll_seconds=0.01)
LIMIT = SETTINGS.surge_limit


def facts(min_size: int, max_size: int) -> GroupFacts:
    return GroupFacts("nodes", Role.NODE, "nodes", min_size, max_size, 2)


def forged_run(instance_id: str, original_desired: int, original_max: int, raised: int) -> Run:
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


def test_a_forged_original_max_size_cannot_raise_the_limit() -> None:
    world = World(groups={"nodes": facts(1, 3)})
    bounds = capacity_bounds(forged_run("i-1", 2, 10**6, 1), world, SETTINGS)["nodes"]
    assert (bounds.min_size, bounds.max_limit) == (1, 3 + LIMIT)
    lower = capacity_bounds(forged_run("i-1", 2, 1, 1), world, SETTINGS)["nodes"]
    assert lower.max_limit == 1 + LIMIT  # a lower record only lowers it


def test_only_the_runs_groups_get_bounds() -> None:
    world = World(groups={"nodes": facts(1, 3), "other": GroupFacts("other", Role.NODE, "other", 1, 3, 2)})
    assert set(capacity_bounds(forged_run("i-1", 2, 3, 1), world, SETTINGS)) == {"nodes"}


class Counting(Telemetry):
    def __init__(self) -> None:
        super().__init__(Metrics(namespace="Test", service="refresher"))
        self.counted: list[str] = []

    def count(self, name: str, value: int = 1) -> None:
        self.counted.append(name)
        super().count(name, value)


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-east-1")
        autoscaling = boto3.client("autoscaling", region_name="us-east-1")
        ddb = boto3.resource("dynamodb", region_name="us-east-1")
        ddb.create_table(**state_table("state"))
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
        deps = Deps.from_clients(
            SETTINGS,
            dynamodb=ddb,
            autoscaling=autoscaling,
            ec2=ec2,
            sqs=boto3.client("sqs", region_name="us-east-1"),
            clock=lambda: T0,
            sleep=lambda s: None,
        )
        deps.telemetry = telemetry
        yield {"deps": deps, "autoscaling": autoscaling, "telemetry": telemetry}


def sizes(autoscaling: Any) -> tuple[int, int]:
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["nodes"])["AutoScalingGroups"]
    return group["DesiredCapacity"], group["MaxSize"]


def test_a_forged_run_with_absurd_targets_is_clamped_at_execution_and_counted(cluster: dict[str, Any]) -> None:
    deps, autoscaling = cluster["deps"], cluster["autoscaling"]
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["nodes"])["AutoScalingGroups"]
    old = group["Instances"][0]["InstanceId"]
    deps.runs.create(forged_run(old, 500, 3, 500))  # the run says: desired 1000, so MaxSize 1000
    out = advance.advance_run(deps, None, 0.0)
    clamped = [a["result"] for a in out["actions"] if a["result"].startswith("updated, clamped")]
    assert clamped and "above the limit" in clamped[0], out["actions"]
    assert sizes(autoscaling) == (3 + LIMIT, 3 + LIMIT)
    assert "CapacityClamped" in cluster["telemetry"].counted


def test_a_run_within_its_bounds_is_applied_as_recorded(cluster: dict[str, Any]) -> None:
    deps, autoscaling = cluster["deps"], cluster["autoscaling"]
    (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=["nodes"])["AutoScalingGroups"]
    deps.runs.create(forged_run(group["Instances"][0]["InstanceId"], 2, 3, 1))
    out = advance.advance_run(deps, None, 0.0)
    assert [a["result"] for a in out["actions"] if a["result"].startswith("updated")] == ["updated"]
    assert sizes(autoscaling) == (3, 3) and "CapacityClamped" not in cluster["telemetry"].counted
