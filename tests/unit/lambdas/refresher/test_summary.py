"""The cluster's groups as ``status`` shows them (``summary.group_rows``, pure), and the status response carrying
them, read from moto through the refresher's handler."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from core.exceptions import AwsRequestError
from core.settings import RefresherSettings
from lambdas.refresher.handler import Deps, handle
from lambdas.refresher.summary import group_rows
from localworld import spot_market
from localworld.cluster import create_kops_cluster

CLUSTER = "demo.k8s.local"


def asg(name: str, zone: str, states: dict[str, str], cluster: str = CLUSTER, **tags: str) -> dict[str, Any]:
    ig = {"kops.k8s.io/instancegroup": f"{name.split('-')[0]}-{zone}"}
    all_tags = {"KubernetesCluster": cluster, "k8s.io/role/node": "1", **ig, **tags}
    return {
        "AutoScalingGroupName": name,
        "AvailabilityZones": [zone],
        "DesiredCapacity": 3,
        "MinSize": 3,
        "MaxSize": 6,
        "Tags": [{"Key": k, "Value": v} for k, v in all_tags.items()],
        "Instances": [{"InstanceId": i, "LifecycleState": s, "AvailabilityZone": zone} for i, s in states.items()],
    }


def test_rows_count_states_and_markets_by_pool_then_zone() -> None:
    raw = [
        asg("nodes-b", "us-east-1b", {"i-1": "InService"}),
        asg(
            "nodes-a",
            "us-east-1a",
            {"i-2": "InService", "i-3": "Pending", "i-4": "Terminating:Wait", "i-5": "InService"},
        ),
        asg("gpu-a", "us-east-1a", {}, **{"node-manager/pool": "gpu"}),
        {**asg("lone", "us-east-1c", {}), "Tags": [{"Key": "KubernetesCluster", "Value": CLUSTER}]},
        asg("other-a", "us-east-1a", {"i-9": "InService"}, cluster="other"),
    ]
    markets = {"i-1": "spot", "i-2": "spot", "i-3": "", "i-4": "spot"}  # i-5: EC2 did not say

    rows = group_rows(raw, CLUSTER, markets)

    assert [(r["pool"], r["zones"], r["name"]) for r in rows] == [
        (None, ["us-east-1c"], "lone"),  # no instance group tag: a pool of its own
        ("gpu", ["us-east-1a"], "gpu-a"),
        ("nodes", ["us-east-1a"], "nodes-a"),
        ("nodes", ["us-east-1b"], "nodes-b"),
    ]
    a = rows[2]
    assert (a["desired"], a["min"], a["max"]) == (3, 3, 6)
    assert (a["in_service"], a["pending"], a["other"]) == (2, 1, 1)
    assert (a["spot"], a["on_demand"]) == (1, 1)  # of the InService and Pending; the leaving one and i-5 not
    assert a["instances"]["i-4"] == "Terminating:Wait"


@pytest.fixture
def deps(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deps]:
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "NodeManagerTest")
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "refresher")
    # All-Spot groups launch Spot Instances, as in AWS: moto needs localworld.spot_market for that. The local world
    # installs it process-wide when its moto server starts, so installing it here (idempotent) makes the answer the
    # same whichever tests ran before in this process.
    spot_market.install()
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        info = create_kops_cluster(session, name=CLUSTER, azs=("us-east-1a", "us-east-1b"), nodes_per_az=2)
        yield Deps.from_clients(
            RefresherSettings.from_env(info.env()),
            dynamodb=session.resource("dynamodb"),
            autoscaling=session.client("autoscaling"),
            ec2=session.client("ec2"),
            sqs=session.client("sqs"),
            region="us-east-1",
        )


def test_status_carries_the_groups_read_from_aws(deps: Deps) -> None:
    response = handle({"action": "status", "cluster": CLUSTER}, deps)

    assert response["status"] == "ok" and "cluster_groups_error" not in response
    workers = [g for g in response["cluster_groups"] if g["role"] == "node"]
    assert [(g["zones"], g["desired"], g["in_service"]) for g in workers] == [
        (["us-east-1a"], 2, 2),
        (["us-east-1b"], 2, 2),
    ]
    # the market is EC2's answer per instance: the all-Spot worker groups' instances Spot, the masters On-Demand
    assert all(g["spot"] == g["in_service"] and g["on_demand"] == 0 for g in workers)
    masters = [g for g in response["cluster_groups"] if g["role"] == "control-plane"]
    assert masters and all(g["on_demand"] == g["in_service"] and g["spot"] == 0 for g in masters)
    assert {g["role"] for g in response["cluster_groups"]} == {"node", "control-plane"}


def test_status_without_the_groups_says_why_and_keeps_the_rest(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(cluster: str) -> list[dict[str, Any]]:
        raise AwsRequestError("DescribeAutoScalingGroups", "AccessDenied", "not allowed")

    monkeypatch.setattr(deps.aws.autoscaling, "cluster_groups", refused)

    response = handle({"action": "status", "cluster": CLUSTER}, deps)

    assert response["status"] == "ok" and response["cluster_groups"] == []
    assert "AccessDenied" in response["cluster_groups_error"] and "membership" in response


def test_status_of_one_run_carries_its_whole_record(deps: Deps) -> None:
    from tests.unit.charts.decided_run import worker_run_through_the_decider

    stored = worker_run_through_the_decider().model_copy(update={"run_id": "20261202T100000Z-abcdef"})
    deps.runs.create(stored)

    response = handle({"action": "status", "cluster": CLUSTER, "run_id": stored.run_id}, deps)

    assert response["status"] == "ok" and [r["run_id"] for r in response["runs"]] == [stored.run_id]
    assert response["run_record"]["steps"][0]["entered"]["terminating"] == "2026-12-02T10:00:20Z"
    missing = handle({"action": "status", "cluster": CLUSTER, "run_id": "20990101T000000Z-000000"}, deps)
    assert (missing["status"], missing["reason"]) == ("refused", "no run 20990101T000000Z-000000")
    assert "run_record" not in handle({"action": "status", "cluster": CLUSTER}, deps)
