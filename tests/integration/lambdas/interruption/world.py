"""The interruption Lambda's test world on moto (in process), shared by its end-to-end tests
(``test_handler.py``, ``test_scope.py``): a small kOps-like set of ASGs, the state and
idempotency tables from core/schema.py, the command queue, and the fixtures of record (tests/events/) pointed at an
instance, an event id and a time.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from adapters.dynamo.store import Store
from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, NODE_ROLE_TAG
from core.model import NodeRecord
from core.schema import idempotency_table, state_table
from core.settings import InterruptionSettings
from lambdas.interruption.handler import Deps
from localworld.spot_market import set_market

EVENTS = Path(__file__).resolve().parents[3] / "events"
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's account, the one the fixtures of record carry
CLUSTER = "demo.k8s.local"
NODES = "nodes-us-east-1a.demo.k8s.local"
MASTER = "master-us-east-1a.masters.demo.k8s.local"
FOREIGN = "nodes-us-east-1a.other.k8s.local"
UNTAGGED = "batch-workers"
T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=5)
AMI = "ami-0123456789abcdef0"  # moto does not check image ids; its default image catalogue is not loaded


def event(name: str, instance_id: str, *, event_id: str | None = None, time: datetime = T0) -> dict[str, Any]:
    """A fixture of record, pointed at ``instance_id``."""
    raw = json.loads((EVENTS / name).read_text())
    raw["id"] = event_id or str(uuid.uuid4())
    raw["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ")
    old = raw["detail"]["instance-id"]
    raw["detail"]["instance-id"] = instance_id
    raw["resources"] = [r.replace(old, instance_id) for r in raw["resources"]]
    return raw


@dataclass
class World:
    autoscaling: Any
    ec2: Any
    sqs: Any
    dynamodb: Any
    dynamodb_client: Any
    queue_url: str
    store: Store
    bare_instance: str

    def settings(self, **overrides: Any) -> InterruptionSettings:
        values = {
            "cluster_name": CLUSTER,
            "table_name": "state",
            "queue_url": self.queue_url,
            "idempotency_table_name": "idempotency",
            "account_id": ACCOUNT,
            **overrides,
        }
        return InterruptionSettings(**values)

    def deps(self, autoscaling: Any = None, **overrides: Any) -> Deps:
        return Deps.from_clients(
            self.settings(**overrides),
            dynamodb=self.dynamodb,
            autoscaling=autoscaling or self.autoscaling,
            ec2=self.ec2,
            sqs=self.sqs,
            dynamodb_client=self.dynamodb_client,
        )

    def group(self, name: str) -> dict[str, Any]:
        return self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]

    def members(self, name: str) -> list[str]:
        return sorted(i["InstanceId"] for i in self.group(name)["Instances"])

    def messages(self) -> list[dict[str, Any]]:
        out = self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], WaitTimeSeconds=0
        )
        return out.get("Messages", [])

    def commands(self) -> list[dict[str, Any]]:
        return list(self.store.query_prefix("CMD#", consistent=True))

    def detaches(self) -> list[dict[str, Any]]:
        return list(self.store.query_prefix("DETACH#", consistent=True))


def _asg(autoscaling: Any, name: str, subnet: str, size: int, tags: dict[str, str]) -> None:
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": "kops", "Version": "$Latest"},
        MinSize=size,
        MaxSize=size + 2,
        DesiredCapacity=size,
        VPCZoneIdentifier=subnet,
        Tags=[
            {"Key": k, "Value": v, "PropagateAtLaunch": True, "ResourceId": name, "ResourceType": "auto-scaling-group"}
            for k, v in tags.items()
        ],
    )


@pytest.fixture
def world(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManagerTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "interruption")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")  # faster start
    Metrics().clear_metrics()  # Powertools keeps unflushed metrics in class-level state shared by every Metrics()
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        autoscaling = boto3.client("autoscaling", region_name=REGION)
        sqs = boto3.client("sqs", region_name=REGION)
        dynamodb = boto3.resource("dynamodb", region_name=REGION)
        dynamodb_client = boto3.client("dynamodb", region_name=REGION)
        dynamodb.create_table(**state_table("state"))
        dynamodb.create_table(**idempotency_table("idempotency"))
        queue_url = sqs.create_queue(QueueName="commands")["QueueUrl"]
        ec2.create_launch_template(
            LaunchTemplateName="kops", LaunchTemplateData={"ImageId": AMI, "InstanceType": "m5.large"}
        )
        subnet = next(s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if s["AvailabilityZone"] == "us-east-1a")
        kops = {CLUSTER_TAG: CLUSTER}
        _asg(autoscaling, NODES, subnet, 2, {**kops, NODE_ROLE_TAG: "1", INSTANCE_GROUP_TAG: "nodes-us-east-1a"})
        _asg(
            autoscaling,
            MASTER,
            subnet,
            1,
            {**kops, "k8s.io/role/control-plane": "1", INSTANCE_GROUP_TAG: "master-us-east-1a"},
        )
        _asg(autoscaling, FOREIGN, subnet, 1, {CLUSTER_TAG: "other.k8s.local", NODE_ROLE_TAG: "1"})
        _asg(autoscaling, UNTAGGED, subnet, 1, {"team": "batch"})
        # a kOps cluster on Spot: every group's instances are Spot Instances (moto launches them On-Demand)
        groups = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
        set_market(i["InstanceId"] for g in groups for i in g["Instances"])
        bare = ec2.run_instances(ImageId=AMI, MinCount=1, MaxCount=1)["Instances"][0]["InstanceId"]
        yield World(
            autoscaling, ec2, sqs, dynamodb, dynamodb_client, queue_url, Store(dynamodb.Table("state"), CLUSTER), bare
        )


def emf(out: str) -> list[dict[str, Any]]:
    """The CloudWatch EMF records printed by Powertools Metrics."""
    records = []
    for line in out.splitlines():
        if line.startswith("{") and '"_aws"' in line:
            records.append(json.loads(line))
    return records


def logs(out: str) -> list[dict[str, Any]]:
    """The JSON log lines printed by the Powertools Logger."""
    return [json.loads(line) for line in out.splitlines() if line.startswith("{") and '"level"' in line]


def counted(records: list[dict[str, Any]], name: str, **dimensions: str) -> int:
    total = 0
    for record in records:
        if name in record and all(record.get(k) == v for k, v in dimensions.items()):
            total += int(record[name]) if not isinstance(record[name], list) else int(sum(record[name]))
    return total


def member(world: World, instance_id: str, name: str = "ip-10-0-1-5.ec2.internal") -> None:
    world.store.put_node(
        NodeRecord(instance_id=instance_id, node_name=name, asg_name=NODES, ready=True, reported_at=datetime.now(UTC)),
        ttl_seconds=600,
    )


def assert_nothing_changed(world: World, groups: dict[str, list[str]]) -> None:
    assert world.commands() == []
    assert world.messages() == []
    assert world.detaches() == []
    for name, members in groups.items():
        assert world.members(name) == members
