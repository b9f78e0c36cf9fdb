"""A refresh run's deadlines and its sharing of the cluster lock with the replenisher, on the local world (the
refresher's handler here, the agent as its own process, moto, the kube-apiserver with the simulator).

The refresher's clock is a ``SimClock`` the tests move forward by hours (membership is kept fresh for a day so the
agent's real-time reports still count); the deadlines are the production defaults. The replenisher is called
directly with the same clock, as its rules would deliver the events.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aws_lambda_powertools import Metrics

from adapters.dynamo.lock import LeaseLock, Taking
from core.lock import Lease
from core.runs import LOCK_OPERATION, RunStatus, StepState
from core.settings import ReplenisherSettings
from lambdas.refresher.handler import Deps
from lambdas.replenisher import handler as replenisher
from localworld.faults import CapacityOutage
from localworld.workloads import block_with_pdb, deploy_pods_on_node
from scenarios.refreshing import RefreshHarness, wait_until

pytestmark = pytest.mark.world

A, B, C = "us-east-1a", "us-east-1b", "us-east-1c"
FRESH_FOR_A_DAY = {"MEMBERSHIP_MAX_AGE_SECONDS": "86400"}


class SimClock:
    """Wall-clock time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, **delta: float) -> None:
        self.offset += timedelta(**delta)


@contextlib.contextmanager
def harness(world: Any, info: Any, clock: SimClock | None = None, **env: str) -> Iterator[RefreshHarness]:
    def hook(deps: Deps) -> Deps:
        if clock is not None:
            deps.clock = clock  # the lock's clock reads deps.clock too
        return deps

    h = RefreshHarness(world, info, refresher_env={**FRESH_FOR_A_DAY, **env}, deps_hook=hook).start()
    try:
        yield h
    finally:
        h.stop()


def replenisher_deps(world: Any, info: Any) -> replenisher.Deps:
    return replenisher.Deps.from_clients(
        ReplenisherSettings.from_env({**info.env(), **FRESH_FOR_A_DAY}),
        dynamodb=world.resource("dynamodb"),
        autoscaling=world.client("autoscaling"),
        ec2=world.client("ec2"),
        sqs=world.client("sqs"),
        metrics=Metrics(namespace="NodeManager", service="replenisher"),
    )


def lock_holder(h: RefreshHarness) -> str | None:
    return (LeaseLock(h.store).current() or {}).get("holder")


def tick_for(h: RefreshHarness, clock: SimClock, hours: float, every_minutes: float = 5) -> list[dict[str, Any]]:
    """Tick the refresher every ``every_minutes`` of simulated time for ``hours``; returns each group's sizes seen."""
    seen = []
    for _ in range(int(hours * 60 / every_minutes)):
        clock.advance(minutes=every_minutes)
        h.invoke({"trigger": "tick"})
        seen.append(h.groups())
    return seen


def covered_by_replenisher(h: RefreshHarness, world: Any, info: Any, clock: SimClock, failing: str, donor: str) -> None:
    """``failing``'s AZ loses its instances while it cannot launch: the failure event reaches the replenisher, which
    raises ``donor`` by as many in the same invocation."""
    outage = CapacityOutage(None, clock=clock)
    if failing not in outage.failing:
        outage.fail(failing)
    lost = [i["InstanceId"] for i in h.groups()[failing]["Instances"]]
    world.client("ec2").terminate_instances(InstanceIds=lost)  # Spot reclaims it; the group cannot replace it
    wait_until(lambda: outage.retry(failing), 10, f"{failing} to fail a launch")
    donor_before = h.groups()[donor]["DesiredCapacity"]
    out = replenisher.handle(outage.events[-1], replenisher_deps(world, info), now=clock())
    assert out["status"] == "acted", out
    assert h.groups()[donor]["DesiredCapacity"] == donor_before + len(lost), "the AZ was not covered"
    outage.clear()


def test_a_spare_that_cannot_launch_pauses_the_run_gives_the_surge_back_and_frees_the_lock(world: Any) -> None:
    info = world.setup_cluster(azs=(A, B), nodes_per_az=1)
    group, donor = info.worker_asgs[A], info.worker_asgs[B]
    clock = SimClock()
    with harness(world, info, clock) as h:
        outage = CapacityOutage(None, clock=clock)
        outage.fail(group)
        before = h.groups()
        response = h.refresh(all=True, instance_groups=[group])
        run_id = response["run"]["run_id"]
        assert "spare_launch 600 s" in response["table"]
        assert h.run(run_id).status is RunStatus.RUNNING and lock_holder(h) is None  # no lock between invocations
        seen = tick_for(h, clock, hours=3)
        run = h.run(run_id)
        assert run.status is RunStatus.PAUSED, run.waiting
        assert "spare_launch deadline (600 s)" in run.reason
        assert run.finished_at is not None and run.finished_at - run.created_at < timedelta(minutes=20)
        assert run.steps[0].state is StepState.UNDONE
        after = h.groups()
        assert after[group]["DesiredCapacity"] == before[group]["DesiredCapacity"]  # the surge given back
        assert after[group]["MaxSize"] == before[group]["MaxSize"]  # the MaxSize it raised restored
        assert all(s[group]["DesiredCapacity"] == before[group]["DesiredCapacity"] for s in seen[6:])  # stays so
        assert lock_holder(h) is None
        covered_by_replenisher(h, world, info, clock, group, donor)


def test_a_spare_that_never_registers_is_terminated_and_the_canary_stops_the_run(world: Any) -> None:
    info = world.setup_cluster(azs=(A, B), nodes_per_az=2)
    group, donor = info.worker_asgs[A], info.worker_asgs[B]
    clock = SimClock()
    with harness(world, info, clock) as h:
        before = h.groups()
        olds = {i["InstanceId"] for i in before[group]["Instances"]}
        world.simulator.join_delay = 10**6  # a broken launch template: new instances never register a node
        try:
            response = h.refresh(all=True, instance_groups=[group], max_surge=2)
            run_id = response["run"]["run_id"]
            spare = wait_until(
                lambda: next(
                    (i["InstanceId"] for i in h.groups()[group]["Instances"] if i["InstanceId"] not in olds), None
                ),
                10,
                "the spare to launch",
            )
            seen = tick_for(h, clock, hours=2)
        finally:
            world.simulator.join_delay = 0.0
        run = h.run(run_id)
        assert run.status is RunStatus.PAUSED and "spare_register deadline (900 s)" in run.reason, run.reason
        assert [s.state for s in run.steps] == [StepState.UNDONE, StepState.SKIPPED]  # the canary stopped the run
        assert run.steps[0].surge_instance_id == spare
        assert max(s[group]["DesiredCapacity"] for s in seen) <= before[group]["DesiredCapacity"] + 1  # one spare only
        assert spare not in h.running_instances()  # terminated with decrement
        assert olds <= h.running_instances() and not list(h.store.query_prefix("CMD#"))  # no old node touched
        after = h.groups()
        assert (after[group]["DesiredCapacity"], after[group]["MaxSize"]) == (
            before[group]["DesiredCapacity"],
            before[group]["MaxSize"],
        )
        assert lock_holder(h) is None
        covered_by_replenisher(h, world, info, clock, group, donor)


def test_a_launch_failure_mid_run_is_covered_by_one_replenisher_invocation_while_the_run_is_active(
    world: Any,
) -> None:
    info = world.setup_cluster(azs=(A, B, C), nodes_per_az=1)
    group, failing, donor = info.worker_asgs[A], info.worker_asgs[C], info.worker_asgs[B]
    with harness(world, info) as h:
        old = h.groups()[group]["Instances"][0]["InstanceId"]
        target = world.simulator.node_for_instance(old)["metadata"]["name"]
        block_with_pdb(world.api, "bench", deploy_pods_on_node(world.api, target, 1, namespace="bench"))
        response = h.refresh(all=True, instance_groups=[group], drain_timeout="120s")
        run_id = response["run"]["run_id"]
        h.wait_run(run_id, 30, lambda r: r.steps[0].state is StepState.DRAINING)
        surged = h.groups()[group]["DesiredCapacity"]
        # a refresh pass holds the lock at the moment the failure arrives: it ends 2 s later
        run_lease = LeaseLock(h.store).acquire("refresher:a-pass-in-flight", LOCK_OPERATION, 180)
        releaser = threading.Timer(2.0, lambda: LeaseLock(h.store).release(run_lease))
        outage = CapacityOutage(None)
        outage.fail(failing)
        world.client("ec2").terminate_instances(InstanceIds=[h.groups()[failing]["Instances"][0]["InstanceId"]])
        wait_until(lambda: outage.retry(failing), 10, f"{failing} to fail a launch")
        donor_before = h.groups()[donor]["DesiredCapacity"]
        releaser.start()
        t0 = time.monotonic()
        out = replenisher.handle(outage.events[-1], replenisher_deps(world, info), now=datetime.now(UTC))
        uncovered = time.monotonic() - t0
        releaser.join()
        outage.clear()
        assert out["status"] == "acted", out
        assert h.groups()[donor]["DesiredCapacity"] == donor_before + 1  # covered by that one invocation
        assert h.groups()[group]["DesiredCapacity"] == surged  # the run's group is no donor; its surge untouched
        assert h.run(run_id).status is RunStatus.RUNNING
        assert 2.0 <= uncovered < 2.0 + 5.0, uncovered
        print(f"\nuncovered: {uncovered:.2f} s from the failure event to the donor raised (a 2 s refresh pass)")


def test_a_refresher_that_lost_the_lock_applies_nothing(world: Any) -> None:
    info = world.setup_cluster(azs=(A,), nodes_per_az=1)
    group = info.worker_asgs[A]
    clock = SimClock()
    with harness(world, info, clock) as h:
        outage = CapacityOutage(None)
        outage.fail(group)
        response = h.refresh(all=True, instance_groups=[group])
        run_id = response["run"]["run_id"]
        stored = h.run(run_id)
        surged = h.groups()[group]["DesiredCapacity"]
        clock.advance(hours=1)  # the spare's deadline passed: the next pass would give the surge back
        thief = "replenisher:thief"
        real_taking = LeaseLock.taking

        def taking_then_lose(self: LeaseLock, holder: str, *args: Any, **kwargs: Any) -> Taking:
            taking = real_taking(self, holder, *args, **kwargs)
            # after the pass read the world and decided, before its save (which takes the lock): another holder
            # takes the lock over
            self.table.update("LOCK", {"holder": thief, "fencing": taking.lease.fencing, "lease_expires_at": 4e9})
            return taking

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(LeaseLock, "taking", taking_then_lose)
            out = h.invoke({"trigger": "tick"})
        assert f"cluster lock held by {thief}" in out.get("lock", ""), out  # the save refused: it waited
        assert h.run(run_id).version == stored.version and h.run(run_id).status is RunStatus.RUNNING
        assert h.groups()[group]["DesiredCapacity"] == surged  # nothing given back by the loser
        assert lock_holder(h) == thief
        item = LeaseLock(h.store).current() or {}
        LeaseLock(h.store).release(Lease(thief, "replenish", int(item["fencing"]), 0))
        h.invoke({"trigger": "tick"})  # the lock free again: the run goes on and pauses at its deadline
        run = h.run(run_id)
        assert run.status is RunStatus.PAUSED and "spare_launch" in run.reason
        assert h.groups()[group]["DesiredCapacity"] == surged - 1
        outage.clear()
