"""``gather`` with what its execution environment kept (``Deps.memo``), against moto: the same ``World`` as a cold
read, a changed ``NODE#`` item or group instance seen at once, an unreadable item counted on every read, an
unchanged ``RUN#`` item's run not made again, and the memo holding only what the last read read."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.dynamo.runs import RunStore
from core.model import NodeRecord, utcnow
from core.runids import new_run_id
from core.runs import Run, RunOptions, RunStatus, RunStep, StepState
from lambdas.replenisher.decide.cleanup import run_group_names
from lambdas.replenisher.gather import GatherMemo, gather
from lambdas.replenisher.handler import Deps
from lambdas.replenisher.listing import group_instances
from localworld.cluster import cluster_instances
from tests.unit.lambdas.replenisher.conftest import CLUSTER


def register_all(deps: Deps, ready: bool = True) -> list[str]:
    now = utcnow()
    ec2: Any = deps.aws.ec2.client  # the gateway's adapter keeps its boto3 client
    ids = sorted(i["InstanceId"] for i in cluster_instances(ec2, CLUSTER))
    for iid in ids:
        deps.store.put_node(NodeRecord(instance_id=iid, node_name=iid, ready=ready, reported_at=now), 7200)
    deps.store.put_membership_mark(now - timedelta(seconds=30), len(ids), 600)
    return ids


def cold(deps: Deps) -> Deps:
    """The same clients in a new execution environment (nothing kept)."""
    return replace(deps, memo=GatherMemo())


def test_a_warm_read_gives_the_world_a_cold_read_gives(deps: Deps) -> None:
    register_all(deps)
    now = utcnow()

    first = gather(deps, now)
    warm = gather(deps, now)

    assert warm == first == gather(cold(deps), now)
    assert len(warm.nodes) == len(deps.memo.nodes) > 0


def test_a_changed_node_item_is_read_as_changed(deps: Deps) -> None:
    ids = register_all(deps, ready=True)
    now = utcnow()
    assert all(n.ready for n in gather(deps, now).nodes.values())

    deps.store.put_node(NodeRecord(instance_id=ids[0], node_name="renamed", ready=False, reported_at=now), 7200)
    world = gather(deps, now)

    assert (world.nodes[ids[0]].ready, world.nodes[ids[0]].node_name) == (False, "renamed")
    assert world == gather(cold(deps), now)


def test_an_unreadable_node_item_is_counted_on_every_read(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    register_all(deps)
    deps.store.put("NODE#i-0123456789abcdef0", {"instance_id": "i-0123456789abcdef0", "node_name": "n"})  # no time
    counted: list[tuple[str, str, str]] = []
    monkeypatch.setattr(deps.telemetry, "count_by", lambda *args: counted.append(args))

    for _ in range(3):
        assert "i-0123456789abcdef0" not in gather(deps, utcnow()).nodes

    assert counted == [("Skipped", "reason", "unreadable_item")] * 3


def test_the_memo_holds_only_what_the_last_read_read(deps: Deps) -> None:
    ids = register_all(deps)
    gather(deps, utcnow())
    assert len(deps.memo.nodes) == len(ids)
    assert sorted(key[0] for listing in deps.memo.groups.values() for key in listing.keys) == ids

    deps.store.delete_node(ids[0])
    asg: Any = deps.aws.autoscaling.client  # the gateway's adapter keeps its boto3 client
    asg.set_instance_health(InstanceId=ids[1], HealthStatus="Unhealthy")
    now = utcnow()
    world = gather(deps, now)

    assert len(deps.memo.nodes) == len(ids) - 1
    assert ids[0] not in world.nodes
    assert sum(len(listing.keys) for listing in deps.memo.groups.values()) == len(ids)
    seen = {i.instance_id: i for g in world.groups.values() for i in g.instances}
    assert seen[ids[1]].health_status == "Unhealthy" and seen[ids[2]].health_status == "Healthy"
    assert seen[ids[0]].launch_time is not None and seen[ids[2]].launch_time is None  # unregistered: asked EC2
    assert world == gather(cold(deps), now)


def test_an_unchanged_run_item_is_not_made_again_and_a_saved_one_is(deps: Deps) -> None:
    ids = register_all(deps)
    runs = RunStore(deps.store)
    started = utcnow()
    run = Run(
        run_id=new_run_id(started),
        cluster=CLUSTER,
        options=RunOptions(max_surge=1),
        steps=[
            RunStep(index=k, group="g", role="node", instance_id=iid, surge_baseline=ids if k == 0 else [])
            for k, iid in enumerate(ids)
        ],
        created_at=started,
        updated_at=started,
    )
    runs.create(run)
    now = utcnow()

    first = gather(deps, now)
    warm = gather(deps, now)

    assert warm.active_runs[0] is first.active_runs[0]  # the item did not change: the Run made once
    assert warm.run_groups == run_group_names(warm.active_runs) == {"g"}  # the groups it names, made with it
    assert warm == gather(cold(deps), now)
    assert warm.protected >= set(ids)

    moved = run.model_copy(deep=True)
    moved.steps[0].state = StepState.SURGING
    moved.steps[0].surge_instance_id = "i-0fffffffffffffff0"
    runs.save(moved)
    after = gather(deps, now)

    assert after.active_runs[0] is not first.active_runs[0]
    assert after.active_runs[0].steps[0].state is StepState.SURGING
    assert "i-0fffffffffffffff0" in after.protected and after == gather(cold(deps), now)
    assert list(deps.memo.runs) == [RunStore.sk(run.run_id)]
    kept = deps.memo.runs[RunStore.sk(run.run_id)]  # busy groups and surge kept with the run made of the item
    assert (kept[1], kept[3], kept[4]) == (after.active_runs[0], {"g"}, after.active_runs[0].surge)
    assert gather(deps, now) == after  # read as before: the busy groups and surge kept

    runs.save(after.active_runs[0].model_copy(update={"status": RunStatus.SUCCEEDED}))
    assert gather(deps, now).active_runs == () and deps.memo.runs == {}  # a run over: not read, not kept
    assert gather(deps, now).run_groups == frozenset()


def test_the_records_keyed_by_instance_follow_the_membership_read(deps: Deps) -> None:
    """A tick answered the membership it read last (the mark's version unchanged) keys it no more; a changed version
    keys the new read; each tick's map is its own (a change to one is not the next tick's)."""
    ids = register_all(deps)
    now = utcnow()
    deps.store.put_membership_mark(now, len(ids), 600, version="t:1")
    first = gather(deps, now)
    keyed = deps.memo.nodes._keyed
    assert keyed is not None and set(keyed) == set(ids)
    first.nodes.pop(ids[0])
    again = gather(deps, now + timedelta(seconds=1))
    assert deps.memo.nodes._keyed is keyed and set(again.nodes) == set(ids)  # the same read, keyed once
    deps.store.put_node(NodeRecord(instance_id=ids[0], node_name="renamed", ready=True, reported_at=now), 7200)
    deps.store.put_membership_mark(now, len(ids), 600, version="t:2")
    changed = gather(deps, now + timedelta(seconds=2))
    assert deps.memo.nodes._keyed is not keyed and changed.nodes[ids[0]].node_name == "renamed"


def test_a_group_answered_as_before_is_the_instances_made_before_and_still_judged_by_membership(deps: Deps) -> None:
    ids = register_all(deps)
    first = gather(deps, utcnow())
    again = gather(deps, utcnow())
    assert all(again.groups[n].instances is first.groups[n].instances for n in first.groups)
    assert set(deps.memo.groups) == {n for n, g in first.groups.items() if g.instances}

    deps.store.delete_node(ids[0])  # its group answered as before, the instance now without a node
    now = utcnow()
    world = gather(deps, now)
    seen = {i.instance_id: i for g in world.groups.values() for i in g.instances}
    assert seen[ids[0]].launch_time is not None and seen[ids[1]].launch_time is None  # unregistered: asked EC2
    assert world == gather(cold(deps), now)


def test_instances_not_all_text_are_never_answered_by_equality() -> None:
    # True == 1: {"HealthStatus": True} == {"HealthStatus": 1}, but the Instances made of them differ ("True", "1")
    entry = {"InstanceId": "i-1", "AvailabilityZone": "us-east-1a", "LifecycleState": "InService"}
    text = group_instances([entry], {})
    assert text.listed == [entry] and text.in_service == ("i-1",)
    assert group_instances([{**entry, "HealthStatus": True}], {}).listed is None
    assert group_instances([{**entry, "HealthStatus": 1}], {}).instances[0].health_status == "1"


def test_the_same_list_answered_again_is_read_anew(deps: Deps, monkeypatch: pytest.MonkeyPatch) -> None:
    register_all(deps)
    answer = deps.aws.autoscaling.cluster_groups(CLUSTER)
    monkeypatch.setattr(deps.aws.autoscaling, "cluster_groups", lambda cluster: answer)
    gather(deps, utcnow())
    group = next(g for g in answer if g["Instances"])
    group["Instances"][0]["HealthStatus"] = "Unhealthy"  # a port that changed its answer in place
    world = gather(deps, utcnow())
    assert world.groups[group["AutoScalingGroupName"]].instances[0].health_status == "Unhealthy"


class _Text(str):
    """A string that is not exactly ``str``: never kept as text."""


_FIELD = st.one_of(
    st.sampled_from(["a", "InService", "Healthy"]),
    st.builds(_Text, st.sampled_from(["a", "b"])),
    st.integers(0, 1),
    st.booleans(),
)
_ENTRY = st.fixed_dictionaries(
    {"InstanceId": _FIELD},
    optional={"AvailabilityZone": _FIELD, "LifecycleState": _FIELD, "HealthStatus": _FIELD},
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ENTRY, max_size=6))
def test_group_instances_reads_each_field_as_its_text(listed: list[dict[str, Any]]) -> None:
    """Against the plain reading: each key the four fields' text, kept as text only when all are exactly strings."""
    keys = [
        tuple(
            str(e.get(k, d))
            for k, d in (
                ("InstanceId", ""),
                ("AvailabilityZone", ""),
                ("LifecycleState", ""),
                ("HealthStatus", "Healthy"),
            )
        )
        for e in listed
    ]
    text = all(
        type(e.get(k, "")) is str
        for e in listed
        for k in ("InstanceId", "AvailabilityZone", "LifecycleState", "HealthStatus")
    )
    got = group_instances(listed, {})
    assert (
        list(got.keys) == keys
        and [(i.instance_id, i.availability_zone, i.lifecycle_state, i.health_status) for i in got.instances] == keys
    )
    assert got.listed is (listed if text else None)
    assert got.in_service == tuple(k[0] for k in keys if k[2] == "InService")


def test_an_unreadable_node_item_leaves_the_membership_unconfirmed(deps: Deps) -> None:
    """A fresh mark over a list missing an unreadable item is not the agent's whole list: absence from it says
    nothing (``World.membership_confirmed``), however many reads (cold, warm) see it."""
    register_all(deps)
    assert gather(deps, utcnow()).membership_confirmed
    deps.store.put("NODE#i-0123456789abcdef0", {"instance_id": "i-0123456789abcdef0", "node_name": "n"})  # no time
    for _ in range(2):
        assert not gather(deps, utcnow()).membership_confirmed
    assert not gather(cold(deps), utcnow()).membership_confirmed
