"""A rig for the replenisher on the local world: a small kOps cluster in moto (3 AZs, 2 workers each), the
simulator's Ready nodes reported as membership (``NODE#``, as the agent's reporter writes them), the event pump and
the capacity-outage fault, and the handler called with an injected clock.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Metrics

from adapters.dynamo import ledger as ledger_store
from core.ledger import Ledger
from core.model import NodeRecord, parse_provider_id
from core.settings import ReplenisherSettings
from lambdas.replenisher.handler import Deps, handle
from localworld.cluster import ClusterInfo
from localworld.eventbus import EventBus, launch_event, scheduled_event
from localworld.faults import CapacityOutage
from localworld.world import LocalWorld

EVENTS = Path(__file__).resolve().parents[3] / "events"


@dataclass
class Rig:
    world: LocalWorld
    info: ClusterInfo
    deps: Deps
    bus: EventBus
    outage: CapacityOutage
    t0: datetime
    responses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def autoscaling(self) -> Any:
        return self.world.client("autoscaling")

    def at(self, minutes: float) -> datetime:
        return self.t0 + timedelta(minutes=minutes)

    def group(self, az: str, kind: str = "worker") -> dict[str, Any]:
        name = (self.info.worker_asgs if kind == "worker" else self.info.master_asgs)[az]
        return self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"][0]

    def sizes(self) -> dict[str, tuple[int, int, int]]:
        """worker AZ letter -> (desired, MaxSize, InService+Pending)."""
        out = {}
        for az in self.info.azs:
            g = self.group(az)
            out[az[-1]] = (
                g["DesiredCapacity"],
                g["MaxSize"],
                sum(1 for i in g["Instances"] if i["LifecycleState"] in ("InService", "Pending")),
            )
        return out

    def report_membership(self, now: datetime, ready: bool = True, skip: set[str] | None = None) -> int:
        """Write NODE# for every simulator node of an instance still running (as the agent's reporter does)."""
        self.world.simulator.wait_settled(5)
        store = self.deps.store
        running = set()
        for g in self.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]:
            running |= {i["InstanceId"]: g["AutoScalingGroupName"] for i in g["Instances"]}.keys()
        asg_of = {
            i["InstanceId"]: g["AutoScalingGroupName"]
            for g in self.autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
            for i in g["Instances"]
        }
        n = 0
        for item in store.query_prefix("NODE#"):
            store.delete(item["sk"])
        for node in self.world.simulator.nodes():
            parsed = parse_provider_id((node.get("spec") or {}).get("providerID"))
            if parsed is None or parsed[1] not in asg_of or parsed[1] in (skip or set()):
                continue
            store.put_node(
                NodeRecord(
                    instance_id=parsed[1],
                    node_name=node["metadata"]["name"],
                    availability_zone=parsed[0],
                    asg_name=asg_of[parsed[1]],
                    ready=ready,
                    reported_at=now,
                ),
                3600,
            )
            n += 1
        store.put_membership_mark(now, n, 3600)  # as the agent's resync: its whole list, confirmed now
        return n

    def wait_nodes(self, count: int) -> None:
        self.world.simulator.nodes_ready(count, 15)

    def invoke(self, event: dict[str, Any], now: datetime) -> dict[str, Any]:
        response = handle(event, self.deps, now=now)
        self.responses.append(response)
        return response

    def tick(self, now: datetime) -> dict[str, Any]:
        return self.invoke(scheduled_event("replenisher-tick", time=now), now)

    def failure(self, az: str, now: datetime, kind: str = "worker") -> dict[str, Any]:
        name = (self.info.worker_asgs if kind == "worker" else self.info.master_asgs)[az]
        return self.invoke(
            launch_event(
                name,
                successful=False,
                time=now,
                availability_zone=az,
                status_message="There is no Spot capacity available that matches your request.",
            ),
            now,
        )

    def ledger(self, az: str) -> Ledger | None:
        item = self.deps.store.get(f"COMP#{self.info.worker_asgs[az]}")
        return None if item is None else ledger_store.from_item(item)

    def lose(self, az: str, count: int) -> list[str]:
        """Terminate ``count`` instances of the worker group in ``az`` (as a Spot reclaim does); returns them."""
        ids = [i["InstanceId"] for i in self.group(az)["Instances"]][:count]
        self.world.client("ec2").terminate_instances(InstanceIds=ids)
        return ids

    def finish_drains(self, status: str = "succeeded") -> list[str]:
        """Play the agent: every queued give-back/surplus command is marked terminal in CMD#. Returns their ids."""
        done = []
        store = self.deps.store
        for item in store.query_prefix("CMD#"):
            if item.get("status") == "queued":
                store.update(item["sk"], {"status": status})
                done.append(item["sk"][4:])
        return done


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


@pytest.fixture
def rig(world: LocalWorld) -> Iterator[Rig]:
    info = world.setup_cluster(nodes_per_az=2)
    # the rig plays the agent itself (finish_drains) on an injected clock: no command sweep re-sending or expiring
    # what it has not played yet (the sweep has its own tests, tests/unit/lambdas/common/test_sweep.py)
    env = {**info.env(), "RECOVERY_HOLD_SECONDS": "600", "COMMAND_SWEEP_SECONDS": "0"}
    settings = ReplenisherSettings.from_env(env)
    deps = Deps.from_clients(
        settings,
        dynamodb=world.resource("dynamodb"),
        autoscaling=world.client("autoscaling"),
        ec2=world.client("ec2"),
        sqs=world.client("sqs"),
        metrics=Metrics(namespace="test", service="replenisher"),
    )
    bus = EventBus(world.session)
    outage = CapacityOutage(bus)
    rig = Rig(world, info, deps, bus, outage, datetime.now(UTC))
    try:
        yield rig
    finally:
        outage.clear()
