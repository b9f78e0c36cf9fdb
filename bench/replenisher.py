"""Benchmark of one replenisher decision on a large cluster (not a test; results go to BENCHMARKS.md).

A kOps-shaped cluster of 30 ASGs in moto (in process, ``mock_aws``): 3 control-plane groups of 1 and 27 worker
groups of 37 (9 pools x 3 AZs), 1,002 instances, each with a fresh ``NODE#`` membership record in the state table.
For each run, one worker group of a not-yet-used pool loses 2 instances while it cannot launch
(``localworld.faults.CapacityOutage``), then the handler is called (warm: clients built once) with:

1. the "EC2 Instance Launch Unsuccessful" event: the full decision (record the failure, take the lock, record the
   intent, raise two siblings, mark raised, release the lock);
2. the same failure again (Auto Scaling's retry): the duplicate path (failure recorded, claims, nothing raised);
3. a "Scheduled Event" tick with nothing to do.

Before the runs, one tick warms the environment up: it puts the termination hook on every group (printed with its
call count; a warm environment asks again only for new or re-created groups).

Every AWS API call the handler makes (Auto Scaling, EC2, SQS, DynamoDB) is counted by a botocore ``before-call``
event hook on its clients; wall time is ``time.perf_counter`` around ``handle``. Targets: at most 10 calls and at
most 1 s per invocation.

Usage: ``python -m bench.replenisher --runs 9 [--markdown]``; ``--smoke`` plays one failure on a cluster of 3
instances per worker group and does not judge the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import boto3
from aws_lambda_powertools import Metrics
from moto import mock_aws

from core import schema
from core.kops import CLUSTER_TAG, INSTANCE_GROUP_TAG, MASTER_ROLE_TAGS, NODE_ROLE_TAG
from core.model import NodeRecord
from core.settings import ReplenisherSettings
from lambdas.replenisher.handler import Deps, handle
from localworld.eventbus import DEFAULT_ACCOUNT, launch_event, scheduled_event
from localworld.faults import CapacityOutage

CLUSTER = "bench.k8s.local"
REGION = "us-east-1"
AZS = ("us-east-1a", "us-east-1b", "us-east-1c")
POOLS = 9
WORKERS_PER_GROUP = 37
TABLE = "node-manager-state"


class CallCounter:
    """Counts API calls on botocore clients through their ``before-call`` event, and the time spent inside them
    (``before-call`` to ``after-call``: moto's work plus botocore's serialising and parsing)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.in_calls = 0.0
        self._started = 0.0

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call.*.*", self._count)
        client.meta.events.register("after-call.*.*", self._done)

    def _count(self, event_name: str, **_: Any) -> None:
        _hook, service, operation = event_name.split(".", 2)
        self.calls[f"{service}:{operation}"] += 1
        self._started = time.perf_counter()

    def _done(self, **_: Any) -> None:
        self.in_calls += time.perf_counter() - self._started

    def take(self) -> tuple[Counter[str], float]:
        calls, self.calls = self.calls, Counter()
        spent, self.in_calls = self.in_calls, 0.0
        return calls, spent


def build_cluster(session: boto3.session.Session, workers_per_group: int = WORKERS_PER_GROUP) -> dict[str, list[str]]:
    """Create the 30 groups and their instances; returns pool -> worker group names (AZ order)."""
    ec2, autoscaling = session.client("ec2"), session.client("autoscaling")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {
        az: ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{32 * i}.0/19", AvailabilityZone=az)["Subnet"]["SubnetId"]
        for i, az in enumerate(AZS)
    }
    ec2.create_launch_template(
        LaunchTemplateName="nodes-lt", LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "m5.large"}
    )

    def group(name: str, az: str, size: int, max_size: int, tags: dict[str, str]) -> None:
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            MinSize=size,
            MaxSize=max_size,
            DesiredCapacity=size,
            LaunchTemplate={"LaunchTemplateName": "nodes-lt", "Version": "$Latest"},
            VPCZoneIdentifier=subnets[az],
            Tags=[
                {
                    "ResourceId": name,
                    "ResourceType": "auto-scaling-group",
                    "Key": k,
                    "Value": v,
                    "PropagateAtLaunch": True,
                }
                for k, v in {CLUSTER_TAG: CLUSTER, **tags}.items()
            ],
        )

    for az in AZS:
        group(
            f"master-{az}.masters.{CLUSTER}",
            az,
            1,
            1,
            {**dict.fromkeys(MASTER_ROLE_TAGS, "1"), INSTANCE_GROUP_TAG: f"master-{az}"},
        )
    pools: dict[str, list[str]] = {}
    for p in range(POOLS):
        for az in AZS:
            name = f"nodes{p}-{az}.{CLUSTER}"
            group(
                name,
                az,
                workers_per_group,
                workers_per_group * 2,
                {NODE_ROLE_TAG: "1", INSTANCE_GROUP_TAG: f"nodes{p}-{az}"},
            )
            pools.setdefault(f"nodes{p}", []).append(name)
    return pools


def report_membership(session: boto3.session.Session, table: Any, cluster: str) -> int:
    """A fresh NODE# record for every instance (as the agent's membership reporter writes them), written straight
    into ``table`` (a boto3 DynamoDB ``Table``) in the documented item layout (docs/DESIGN.md, "Table items")."""
    now = datetime.now(UTC)
    count = 0
    with table.batch_writer() as batch:
        for page in session.client("autoscaling").get_paginator("describe_auto_scaling_groups").paginate():
            for g in page["AutoScalingGroups"]:
                for inst in g["Instances"]:
                    record = NodeRecord(
                        instance_id=inst["InstanceId"],
                        node_name=f"ip-{inst['InstanceId'][2:]}",
                        availability_zone=inst["AvailabilityZone"],
                        asg_name=g["AutoScalingGroupName"],
                        ready=True,
                        reported_at=now,
                    )
                    batch.put_item(
                        Item={
                            "pk": schema.agent_partition_of(cluster),
                            "sk": f"NODE#{record.instance_id}",
                            **record.model_dump(mode="json"),
                        }
                    )
                    count += 1
    return count


Result = tuple[float, float, int, Counter[str]]  # wall s, of which in AWS calls s, call count, calls by operation


def run(runs: int, workers_per_group: int = WORKERS_PER_GROUP) -> dict[str, list[Result]]:
    results: dict[str, list[Result]] = {"failure": [], "duplicate": [], "tick": []}
    with mock_aws():
        session = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        )
        t0 = time.perf_counter()
        pools = build_cluster(session, workers_per_group)
        dynamodb = session.resource("dynamodb")
        session.client("dynamodb").create_table(**schema.state_table(TABLE))
        sqs = session.client("sqs")
        queue_url = sqs.create_queue(QueueName="commands")["QueueUrl"]
        settings = ReplenisherSettings(
            cluster_name=CLUSTER, table_name=TABLE, queue_url=queue_url, account_id=DEFAULT_ACCOUNT
        )
        autoscaling, ec2 = session.client("autoscaling"), session.client("ec2")
        deps = Deps.from_clients(
            settings,
            dynamodb=dynamodb,
            autoscaling=autoscaling,
            ec2=ec2,
            sqs=sqs,
            metrics=Metrics(namespace="bench", service="replenisher"),
        )
        nodes = report_membership(session, dynamodb.Table(TABLE), CLUSTER)
        built = time.perf_counter() - t0
        print(f"cluster: {3 + POOLS * len(AZS)} ASGs, {nodes} instances with membership, built in {built:.1f} s")
        counter = CallCounter()
        for client in (autoscaling, ec2, sqs, dynamodb.meta.client):
            counter.attach(client)
        # The first invocation of an execution environment also gives every group its termination hook
        # (lambdas/replenisher/hooks.py: DescribeLifecycleHooks per group, PutLifecycleHook where missing); the warm
        # environment then asks again only for new or re-created groups. Warm up once, so the runs measure that.
        with contextlib.redirect_stdout(io.StringIO()):
            handle(scheduled_event("tick", time=datetime.now(UTC)), deps)
        calls, _ = counter.take()
        print(f"warm-up tick (hooks put once per environment): {sum(calls.values())} calls: {dict(calls)}")
        outage = CapacityOutage()
        sink = io.StringIO()
        for k, (_pool, names) in enumerate(sorted(pools.items())[:runs]):
            failed = names[0]
            outage.fail(failed)
            ids = [
                i["InstanceId"]
                for i in autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[failed])["AutoScalingGroups"][
                    0
                ]["Instances"]
            ][:2]
            ec2.terminate_instances(InstanceIds=ids)
            now = datetime.now(UTC)
            for label, event in (
                (
                    "failure",
                    launch_event(
                        failed,
                        successful=False,
                        time=now,
                        availability_zone=AZS[0],
                        status_message="There is no Spot capacity available.",
                    ),
                ),
                ("duplicate", launch_event(failed, successful=False, time=now, availability_zone=AZS[0])),
                ("tick", scheduled_event("tick", time=now)),
            ):
                counter.take()
                with contextlib.redirect_stdout(sink):
                    start = time.perf_counter()
                    response = handle(event, deps, now=now)
                    took = time.perf_counter() - start
                calls, in_calls = counter.take()
                results[label].append((took, in_calls, sum(calls.values()), calls))
                if label == "failure":
                    assert response["operation"] == "replenish", response
            outage.recover(failed)
            print(
                f"run {k + 1}: "
                + ", ".join(
                    f"{label} {r[0]:.3f} s ({r[0] - r[1]:.3f} s own) / {r[2]} calls"
                    for label in ("failure", "duplicate", "tick")
                    for r in [results[label][-1]]
                )
            )
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replenisher", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=POOLS, help=f"failures played, one per pool (max {POOLS})")
    parser.add_argument("--markdown", action="store_true", help="print the result table as Markdown")
    parser.add_argument("--smoke", action="store_true", help="one failure on the smallest cluster; not judged")
    args = parser.parse_args(argv)
    results = run(1, workers_per_group=3) if args.smoke else run(min(args.runs, POOLS))
    rows = []
    for label, what in (
        ("failure", "Launch Unsuccessful -> siblings raised"),
        ("duplicate", "the same failure again (retry)"),
        ("tick", "periodic tick, nothing to do"),
    ):
        walls = [r[0] for r in results[label]]
        owns = [r[0] - r[1] for r in results[label]]
        calls = [r[2] for r in results[label]]
        breakdown = results[label][-1][3]
        rows.append(
            (
                what,
                statistics.median(walls),
                max(walls),
                statistics.median(owns),
                max(owns),
                min(calls),
                max(calls),
                ", ".join(f"{op} {n}" for op, n in sorted(breakdown.items())),
            )
        )
    if args.markdown:
        print("| invocation | wall p50 (max) | outside AWS calls p50 (max) | AWS calls | calls (last run) |")
        print("|---|---|---|---|---|")
        for what, p50, worst, own, own_worst, lo, hi, detail in rows:
            span = f"{lo}" if lo == hi else f"{lo}-{hi}"
            print(f"| {what} | {p50:.3f} s ({worst:.3f} s) | {own:.3f} s ({own_worst:.3f} s) | {span} | {detail} |")
    else:
        for what, p50, worst, own, own_worst, lo, hi, detail in rows:
            print(
                f"{what}: wall p50 {p50:.3f} s max {worst:.3f} s; outside calls p50 {own:.3f} s max "
                f"{own_worst:.3f} s; calls {lo}-{hi} ({detail})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
