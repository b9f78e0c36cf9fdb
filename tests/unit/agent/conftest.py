"""Fixtures of the agent's unit tests: a consumer's world on moto (``tests.unit.agent.consumer_world``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from adapters.dynamo.store import Store
from localworld.cluster import create_kops_cluster
from tests.unit.agent.consumer_world import CLUSTER, World


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
