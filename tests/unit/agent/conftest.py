"""Fixtures of the agent's unit tests: a consumer's world on moto (``tests.unit.agent.consumer_world``) and the
membership reporter's (``tests.unit.agent.membership_world``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.store import Store
from localworld.cluster import cluster_instances, create_kops_cluster
from tests.unit.agent import membership_world
from tests.unit.agent.consumer_world import CLUSTER, World
from tests.unit.agent.membership_world import Aws, CountingAutoscaling


@pytest.fixture(scope="module")
def session() -> Any:
    """One boto3 session for the module: its clients share the loaded service models (fast to create)."""
    return boto3.Session(region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


@pytest.fixture
def world(session: Any) -> Iterator[World]:
    with mock_aws():
        info = create_kops_cluster(session, name=CLUSTER, azs=())  # queues, table, rule; no ASGs needed
        store = Store(session.resource("dynamodb").Table(info.table_name), CLUSTER)
        yield World(session, info, session.client("sqs"), session.client("events"), store)


@pytest.fixture
def aws() -> Iterator[Aws]:
    """A kOps cluster on moto (3 masters + 3 workers, ``membership_world.CLUSTER``) and its state table."""
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        create_kops_cluster(session, name=membership_world.CLUSTER, nodes_per_az=1)  # 3 masters + 3 workers
        ec2 = session.client("ec2")
        instances = {}
        for inst in cluster_instances(ec2, membership_world.CLUSTER):
            tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
            instances[inst["InstanceId"]] = (inst["Placement"]["AvailabilityZone"], tags["aws:autoscaling:groupName"])
        store = Store(session.resource("dynamodb").Table("node-manager-state"), membership_world.CLUSTER)
        yield Aws(session, CountingAutoscaling(session.client("autoscaling")), store, instances)
