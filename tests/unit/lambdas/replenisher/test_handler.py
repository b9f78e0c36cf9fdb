"""What the replenisher reads of membership (``gather``), against moto: a ``NODE#`` record the agent has not
rewritten for long is fresh while the agent's ``MEMBERSHIP`` mark is."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from adapters.dynamo.node_memo import REUSE_SECONDS
from core.model import NodeRecord, utcnow
from lambdas.replenisher.gather import gather
from lambdas.replenisher.handler import Deps
from lambdas.replenisher.own_commands import own_command_error
from localworld.cluster import cluster_instances
from tests.dynamo_reads import answered_sort_keys
from tests.unit.lambdas.replenisher.conftest import CLUSTER
from tests.unit.lambdas.replenisher.own_drain import own


def instance_ids(deps: Deps) -> list[str]:
    ec2: Any = deps.aws.ec2.client  # the gateway's adapter keeps its boto3 client
    return [i["InstanceId"] for i in cluster_instances(ec2, CLUSTER)]


@pytest.mark.parametrize("marked", [True, False])
def test_old_records_count_while_the_agents_mark_is_fresh(deps: Deps, marked: bool) -> None:
    now = utcnow()
    ids = instance_ids(deps)
    for iid in ids:
        record = NodeRecord(instance_id=iid, node_name=iid, ready=True, reported_at=now - timedelta(hours=1))
        deps.store.put_node(record, 7200)
    if marked:
        deps.store.put_membership_mark(now - timedelta(seconds=30), len(ids), 600)

    world = gather(deps, now)

    assert set(world.nodes) == (set(ids) if marked else set())


def test_gather_reads_its_own_commands_and_leaves_the_others(deps: Deps) -> None:
    now = utcnow()
    own(deps, "giveback-1")
    own(deps, "surplus-2")
    for command_id in ("drain-3", "refresh-4"):
        deps.store.put(f"CMD#{command_id}", {"status": "queued", "instance_id": "i-0123456789abcdef0"})
    deps.store.put("NODE#not-a-record", {"instance_id": 7})  # unreadable: counted and left out, not raised

    world = gather(deps, now)

    assert sorted(world.commands) == ["giveback-1", "surplus-2"]
    assert world.commands["giveback-1"]["status"] == "queued"
    assert "not-a-record" not in world.nodes and 7 not in world.nodes


def test_an_own_command_item_decide_cannot_read_is_left_out_and_counted(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the agent partition is written by the agent's role too: an item of another shape never reaches decide
    item = own(deps, "surplus-ok")
    forged = {
        "surplus-none": {"status": "queued", "instance_id": "X"},  # no command
        "surplus-junk": {"status": "queued", "command": {"deadline": "not a time"}},
        "giveback-map": {**item, "command": "not a map"},
        "giveback-naive": {**item, "command": {**item["command"], "deadline": "2030-01-01T00:00:00"}},
        "surplus-created": {**item, "created_at": "yesterday"},
        "surplus-status": {**item, "status": ["queued"]},
    }
    for command_id, attrs in forged.items():
        deps.store.put(f"CMD#{command_id}", attrs)
    counted: list[tuple[str, str, str]] = []
    monkeypatch.setattr(deps.telemetry, "count_by", lambda *args: counted.append(args))

    world = gather(deps, utcnow())
    assert sorted(world.commands) == ["surplus-ok"]
    # their ids are kept: recorded, so a drain sent again takes an id past them (``decide.builder.reissued_id``)
    assert world.unreadable_commands == frozenset(forged)
    assert counted == [("Skipped", "reason", "unreadable_item")] * len(forged)
    assert own_command_error(item) is None and all(own_command_error(attrs) for attrs in forged.values())


def test_gather_never_reads_the_agents_history(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    # a week of other commands and lifecycle claims is most of the agent partition: not one of them is read
    now = utcnow()
    own(deps, "giveback-1", "succeeded")
    own(deps, "surplus-2", "succeeded")
    for command_id in ("drain-3", "refresh-4", "rebalance-5"):
        deps.store.put(f"CMD#{command_id}", {"status": "succeeded", "instance_id": "i-0123456789abcdef0"})
    deps.store.put("HOOK#i-0123456789abcdef0", {"state": "claimed"})
    deps.store.put("CPDRAIN#0", {"holder": "x"})
    deps.store.put_membership_mark(now, 0, 600)
    answered = answered_sort_keys(monkeypatch, deps.store.table)

    world = gather(deps, now)

    assert sorted(world.commands) == ["giveback-1", "surplus-2"]
    assert "CMD#giveback-1" in answered
    read_history = [
        sk for sk in answered if sk.startswith(("CMD#drain", "CMD#refresh", "CMD#rebalance", "HOOK#", "CPDRAIN#"))
    ]
    assert read_history == []


def test_gather_leaves_the_early_replacements_and_runs_that_are_over(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # left out by DynamoDB (``gather.LEFT_OUT``): neither sent nor parsed; any other such item sent and judged as before
    now = utcnow()
    for iid, state in (
        ("i-0000000000000000a", "detached"),
        ("i-0000000000000000b", "gone"),
        ("i-0000000000000000c", "terminated"),
    ):
        deps.store.put(f"DETACH#{iid}", {"asg_name": "nodes", "state": state, "recorded_at": now.isoformat()})
    deps.store.put("RUN#1-over", {"run_id": "1-over", "status": "succeeded"})
    deps.store.put("RUN#2-unknown", {"run_id": "2-unknown", "status": "resting"})  # counts as active: unreadable
    deps.store.put("RUN#3-no-id", {"status": "cancelled"})  # sent, left by the loop
    answered = answered_sort_keys(monkeypatch, deps.store.table)

    world = gather(deps, now)

    assert sorted(world.detached) == ["i-0000000000000000a"]
    assert "i-0000000000000000a" in world.protected and "i-0000000000000000b" not in world.protected
    sent = [sk for sk in answered if sk.startswith(("DETACH#", "RUN#"))]
    assert sent == ["DETACH#i-0000000000000000a", "RUN#2-unknown", "RUN#3-no-id"] and world.runs_unreadable


def test_gather_reads_the_groups_after_the_lock(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    # sim seed 42 of the lock profile: a duplicate invocation ran whole between this one's group read and its
    # partition read; this one saw the raise in the ledger, the donor at its old size, and took it for a kOps reset
    asg: Any = deps.aws.autoscaling.client  # the gateway's adapter keeps its boto3 client
    name = sorted(g["AutoScalingGroupName"] for g in asg.describe_auto_scaling_groups()["AutoScalingGroups"])[-1]
    real = deps.store.query_cluster_partition

    def another_invocation_first(*args: Any, **kwargs: Any) -> Any:
        asg.update_auto_scaling_group(AutoScalingGroupName=name, MaxSize=9, DesiredCapacity=5)
        return real(*args, **kwargs)

    monkeypatch.setattr(deps.store, "query_cluster_partition", another_invocation_first)

    world = gather(deps, utcnow())

    assert world.groups[name].desired == 5 and world.groups[name].max_size == 9


def test_a_warm_tick_reads_the_node_items_only_when_the_agents_version_changed(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's ``MEMBERSHIP`` mark carries the version of the ``NODE#`` items it wrote: a tick that finds the
    version its environment read last answers the records it read then (no ``NODE#`` item read); a new version, a
    mark without one, or a read older than ``REUSE_SECONDS`` reads them again."""
    now = utcnow()
    ids = instance_ids(deps)
    for iid in ids:
        deps.store.put_node(NodeRecord(instance_id=iid, node_name=iid, ready=True, reported_at=now), 7200)
    deps.store.put_membership_mark(now, len(ids), 600, version="t:1")
    answered = answered_sort_keys(monkeypatch, deps.store.table)

    first = gather(deps, now)
    assert sorted(sk for sk in answered if sk.startswith("NODE#")) == sorted(f"NODE#{iid}" for iid in ids)
    answered.clear()
    later = now + timedelta(seconds=60)
    deps.store.put_membership_mark(later, len(ids), 600, version="t:1")  # a resync that wrote no NODE# item
    again = gather(deps, later)
    assert [sk for sk in answered if sk.startswith("NODE#")] == []
    assert again.nodes == first.nodes

    cordoned = NodeRecord(instance_id=ids[0], node_name=ids[0], ready=True, unschedulable=True, reported_at=later)
    deps.store.put_node(cordoned, 7200)
    deps.store.put_membership_mark(later, len(ids), 600, version="t:2")  # the agent counts that write
    changed = gather(deps, later)
    assert changed.nodes[ids[0]].unschedulable
    answered.clear()

    deps.store.put_membership_mark(later, len(ids), 600)  # an agent that writes no version: read every tick
    gather(deps, later)
    assert sorted(sk for sk in answered if sk.startswith("NODE#")) == sorted(f"NODE#{iid}" for iid in ids)
    answered.clear()
    deps.store.put_membership_mark(later, len(ids), 600, version="t:2")
    gather(deps, later)  # read at t:2 again (the versionless read was kept for no reuse)
    answered.clear()
    gather(deps, later + timedelta(seconds=REUSE_SECONDS))  # the same version, but the read is too old
    assert sorted(sk for sk in answered if sk.startswith("NODE#")) == sorted(f"NODE#{iid}" for iid in ids)
