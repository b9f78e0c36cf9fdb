"""The replenisher publishes the cluster lock's age (``LockHeldSeconds``) on every invocation, on moto: the metric the
``LockHeldTooLong`` alarm watches (infra/operations.py), with the namespace and dimensions the alarm names, in the
Embedded Metric Format records Powertools writes to stdout."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws

from adapters.dynamo.lock import LeaseLock
from core.schema import state_table
from core.settings import ReplenisherSettings
from infra.operations import LOCK_HELD_SECONDS, REPLENISHER_SERVICE
from lambdas.replenisher.handler import Deps, handle
from localworld.eventbus import scheduled_event

ACCOUNT, REGION, CLUSTER = "123456789012", "us-east-1", "demo.k8s.local"


@pytest.fixture
def deps(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]  # yields Deps
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManager")
    with mock_aws():
        dynamodb = boto3.resource("dynamodb", region_name=REGION)
        dynamodb.create_table(**state_table("state"))
        sqs = boto3.client("sqs", region_name=REGION)
        queue_url = sqs.create_queue(QueueName="commands")["QueueUrl"]
        settings = ReplenisherSettings(
            cluster_name=CLUSTER, table_name="state", queue_url=queue_url, account_id=ACCOUNT, lock_wait_seconds=0
        )
        yield Deps.from_clients(
            settings,
            dynamodb=dynamodb,
            autoscaling=boto3.client("autoscaling", region_name=REGION),
            ec2=boto3.client("ec2", region_name=REGION),
            sqs=sqs,
            metrics=Metrics(namespace="NodeManager", service=REPLENISHER_SERVICE),
            region=REGION,
        )


def lock_ages(out: str) -> list[tuple[float, dict[str, Any]]]:
    """(value, record) of every ``LockHeldSeconds`` value in the EMF records of ``out``."""
    found = []
    for line in out.splitlines():
        if not line.startswith("{") or '"_aws"' not in line:
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for metric in directive["Metrics"]:
                if metric["Name"] == LOCK_HELD_SECONDS:
                    assert metric["Unit"] == "Seconds"
                    values = record[LOCK_HELD_SECONDS]
                    for value in values if isinstance(values, list) else [values]:
                        found.append((float(value), record | {"_directive": directive}))
    return found


def test_every_invocation_publishes_the_lock_age_the_alarm_watches(
    deps: Deps, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    handle(scheduled_event("replenisher-tick", time=now), deps, now=now)
    [(free, _)] = lock_ages(capsys.readouterr().out)
    assert free == 0.0

    acquired = now - timedelta(minutes=10)
    LeaseLock(deps.store, clock=acquired.timestamp).acquire("refresher:r1:i1", "refresh", 3600)
    handle(scheduled_event("replenisher-tick", time=now), deps, now=now)
    [(held, record)] = lock_ages(capsys.readouterr().out)
    assert held == 600.0
    directive = record["_directive"]
    assert directive["Namespace"] == "NodeManager"
    # the alarm's dimensions, exactly: cluster and service (infra/operations.py)
    assert any(set(dims) == {"cluster", "service"} for dims in directive["Dimensions"])
    assert record["cluster"] == CLUSTER and record["service"] == REPLENISHER_SERVICE
