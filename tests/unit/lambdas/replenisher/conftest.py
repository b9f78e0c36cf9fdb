"""The replenisher's tests against moto: ``deps``, a kOps cluster of one node per AZ and the replenisher's ``Deps``
over it (``CLUSTER``)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from core.settings import ReplenisherSettings
from lambdas.replenisher.handler import Deps
from localworld.cluster import create_kops_cluster

CLUSTER = "demo.k8s.local"


@pytest.fixture
def deps(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deps]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManagerTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "replenisher")
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        info = create_kops_cluster(session, name=CLUSTER, nodes_per_az=1)
        settings = ReplenisherSettings.from_env(info.env())
        yield Deps.from_clients(
            settings,
            dynamodb=session.resource("dynamodb"),
            autoscaling=session.client("autoscaling"),
            ec2=session.client("ec2"),
            sqs=session.client("sqs"),
            region="us-east-1",
        )
