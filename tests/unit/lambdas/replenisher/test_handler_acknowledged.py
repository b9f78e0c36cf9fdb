"""Events that concern no reconcile are answered before the world is read (``decide.acknowledged``), on moto: an
agent result of a command the replenisher did not send costs no call, a launch success while no ledger carries a
compensation one Query of the ``COMP#`` items; with a compensation in a ledger, a launch success is a whole reconcile.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from botocore.client import BaseClient

from adapters.dynamo import ledger as ledger_store
from core.ledger import Compensation, Ledger
from core.model import utcnow
from lambdas.replenisher.handler import Deps, handle
from localworld.eventbus import launch_event
from tests.unit.lambdas.replenisher.conftest import CLUSTER


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every AWS call the code under test makes, by operation name, in order."""
    made: list[str] = []
    real = BaseClient._make_api_call

    def counted(self: BaseClient, operation: str, params: dict[str, Any]) -> Any:
        made.append(operation)
        return real(self, operation, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", counted)
    yield made


def drain_result(command_id: str, cluster: str = CLUSTER) -> dict[str, Any]:
    return {
        "version": "0",
        "id": f"result-{command_id}",
        "detail-type": "Node Drain Succeeded",
        "source": "node-manager.agent",
        "account": "123456789012",
        "time": utcnow().isoformat(),
        "region": "us-east-1",
        "resources": [],
        "detail": {"command_id": command_id, "cluster": cluster, "instance_id": "i-0123456789abcdef0"},
    }


def worker_group(deps: Deps) -> str:
    groups = deps.aws.autoscaling.cluster_groups(CLUSTER)
    return next(g["AutoScalingGroupName"] for g in groups if g["AutoScalingGroupName"].startswith("nodes-"))


def notes(response: dict[str, Any]) -> list[str]:
    return [a["action"] for a in response["actions"]]


@pytest.mark.parametrize("command_id", ["refresh-r1-0", "spot-abc", "rebalance-abc", "lifecycle-abc"])
def test_a_result_of_another_operations_command_reads_nothing(deps: Deps, calls: list[str], command_id: str) -> None:
    response = handle(drain_result(command_id), deps, now=utcnow())

    assert response["status"] == "noted"
    assert notes(response) == [f"not_ours: command {command_id} of cluster {CLUSTER}"]
    assert calls == []


def test_a_result_of_another_clusters_giveback_reads_nothing(deps: Deps, calls: list[str]) -> None:
    response = handle(drain_result("giveback-i-0123456789abcdef0", cluster="other.k8s.local"), deps, now=utcnow())

    assert notes(response) == ["not_ours: command giveback-i-0123456789abcdef0 of cluster other.k8s.local"]
    assert calls == []


def test_a_result_of_its_own_giveback_is_a_whole_reconcile(deps: Deps, calls: list[str]) -> None:
    handle(drain_result("giveback-i-0123456789abcdef0"), deps, now=utcnow())

    assert "DescribeAutoScalingGroups" in calls and calls.count("Query") >= 3


def test_a_launch_success_without_a_compensation_is_one_query_once_its_group_is_hooked(
    deps: Deps, calls: list[str]
) -> None:
    name = worker_group(deps)
    ledger_store.write(deps.store, Ledger(asg_name=name), None, utcnow())  # a ledger, but no compensation in it
    calls.clear()
    now = utcnow()

    # a group this environment has not seen hooked (kOps may have just created it): a whole reconcile, hook and all
    first = handle(launch_event(name, successful=True, time=now), deps, now=now)
    assert "DescribeAutoScalingGroups" in calls and "PutLifecycleHook" in calls
    assert first["hooks"][name].startswith("put") and name in deps.hooks_seen
    calls.clear()

    response = handle(launch_event(name, successful=True, time=now), deps, now=now)

    assert response["status"] == "noted"
    assert notes(response) == [f"no_compensation: a launch in {name}: no ledger carries a compensation"]
    assert calls == ["Query"]


def test_a_launch_success_during_a_compensation_is_a_whole_reconcile(deps: Deps, calls: list[str]) -> None:
    name = worker_group(deps)
    now = utcnow()
    owed = Compensation(pool="nodes", owed=1, started_at=now - timedelta(minutes=5))
    handle(launch_event(name, successful=True, time=now), deps, now=now)  # its hook seen
    assert name in deps.hooks_seen
    ledger_store.write(deps.store, Ledger(asg_name=name, compensation=owed), None, now)
    calls.clear()

    response = handle(launch_event(name, successful=True, time=now), deps, now=now)

    assert not any(a.startswith("no_compensation") for a in notes(response))
    assert calls[0] == "Query" and "DescribeAutoScalingGroups" in calls
