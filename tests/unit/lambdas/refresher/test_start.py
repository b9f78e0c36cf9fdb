"""A refresh's start (``lambdas.refresher.start``) on moto: on a lock that was free when read, the run is created in
the transaction that takes the lock, and its first pass decides on the start's read; when the lock changed hands
since that read, or was held then, the start reads the lock and the runs again under it and never makes a second
active run."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import boto3
import pytest

from adapters.dynamo.lock import LeaseLock
from adapters.dynamo.runs import RunStore
from lambdas.refresher.handler import Deps, handle
from tests.unit.lambdas.refresher.moto_cluster import RUN_ID, T0, Cluster, moto_cluster, pending_run

REQUEST = {"action": "refresh", "cluster": "demo", "all": True}


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    with moto_cluster(monkeypatch) as c:
        c.tag_as_kops_workers()
        yield c


def counted_deps(cluster: Cluster) -> tuple[Deps, list[str]]:
    """New deps whose clients note every AWS call they make, in order (``<service>.<operation>``)."""
    calls: list[str] = []
    session = boto3._get_default_session()  # the clients ``new_deps`` makes come from it

    def note(model: Any, **_: Any) -> None:
        calls.append(f"{model.service_model.endpoint_prefix}.{model.name}")

    session.events.register("before-call", note)
    try:
        return cluster.new_deps(), calls
    finally:
        session.events.unregister("before-call", note)


def on_first_group_read(deps: Deps, meanwhile: Callable[[], None]) -> None:
    """Run ``meanwhile`` once, right before the start's first read of the groups (after its snapshot)."""
    reader = deps.aws.autoscaling
    original = reader.cluster_groups
    done: list[bool] = []

    def cluster_groups(cluster: str) -> Any:
        if not done:
            done.append(True)
            meanwhile()
        return original(cluster)

    reader.cluster_groups = cluster_groups  # type: ignore[method-assign]


def test_a_start_on_a_free_lock_takes_it_in_the_runs_creation(cluster: Cluster) -> None:
    deps, calls = counted_deps(cluster)
    out = handle(REQUEST, deps)
    assert out["status"] == "started", out
    first_surge = calls.index("autoscaling.UpdateAutoScalingGroup")
    assert calls[: first_surge + 2] == [
        "dynamodb.Query",  # the LOCK item and the active runs
        "dynamodb.Query",  # membership
        "autoscaling.DescribeAutoScalingGroups",
        "ec2.DescribeLaunchTemplates",
        "ec2.DescribeInstances",
        "dynamodb.TransactWriteItems",  # the run created, the lock taken
        "autoscaling.DescribeAutoScalingGroups",  # the first pass: the groups again, nothing else read again
        "dynamodb.Query",  # the COMP# ledgers, before a group's first surge
        "dynamodb.TransactWriteItems",  # the surge's save
        "autoscaling.UpdateAutoScalingGroup",
        "dynamodb.UpdateItem",  # the lock given up
    ], calls
    (created,) = [a["result"] for a in out["actions"] if a["action"].startswith("create run")]
    assert created.startswith("created, cluster lock taken as refresher:") and created.endswith("(fencing 1)")
    lock = deps.lock.current() or {}
    assert lock["fencing"] == 1 and not lock.get("holder")
    assert cluster.sizes() == (3, 3)  # surged once


def test_a_run_created_between_the_read_and_the_take_is_found_and_no_second_one_made(cluster: Cluster) -> None:
    deps = cluster.new_deps()
    other = pending_run(cluster.instances()[0])

    def another_start() -> None:  # e.g. the interruption Lambda's replacement run, under the lock
        lock = LeaseLock(deps.store, clock=T0.timestamp)
        lease = lock.acquire("interruption:x", "replace", 300)
        RunStore(deps.store).create(other, fence=lease)
        lock.release(lease)

    on_first_group_read(deps, another_start)
    out = handle(REQUEST, deps)
    assert out["status"] == "already_running" and out["run"]["run_id"] == RUN_ID, out
    assert [r.run_id for r in RunStore(deps.store).list(5) if r.status.active] == [RUN_ID]


def test_a_lock_held_when_read_is_read_again_with_the_runs_under_it(cluster: Cluster) -> None:
    """A holder whose valid lease the snapshot read can create a run and release the lock without a new fencing value:
    a take pinned to that read would then succeed on a stale view of the runs."""
    deps = cluster.new_deps()
    lock = LeaseLock(deps.store, clock=T0.timestamp)
    lease = lock.acquire("interruption:x", "replace", 300)
    other = pending_run(cluster.instances()[0])

    def create_and_release() -> None:
        RunStore(deps.store).create(other, fence=lease)
        lock.release(lease)

    on_first_group_read(deps, create_and_release)
    out = handle(REQUEST, deps)
    assert out["status"] == "already_running" and out["run"]["run_id"] == RUN_ID, out
    assert [r.run_id for r in RunStore(deps.store).list(5) if r.status.active] == [RUN_ID]


def test_the_longest_max_age_allowed_fits_a_run_record(cluster: Cluster) -> None:
    """``MAX_AGE_LIMIT_SECONDS`` (what a request and the settings may give) is stored; 10^38 s is not (the reason for
    the bound)."""
    from core.settings import MAX_AGE_LIMIT_SECONDS

    deps = cluster.new_deps()
    run = pending_run("i-0123456789abcdef0")
    run.options = run.options.model_copy(update={"max_age_seconds": MAX_AGE_LIMIT_SECONDS})
    deps.runs.create(run)
    stored = deps.runs.get(run.run_id)
    assert stored is not None and stored.options.max_age_seconds == MAX_AGE_LIMIT_SECONDS
    too_long = pending_run("i-0123456789abcdef1").model_copy(update={"run_id": RUN_ID + "x"})
    too_long.options = too_long.options.model_copy(update={"max_age_seconds": 10**40})
    with pytest.raises(ArithmeticError):
        deps.runs.create(too_long)
