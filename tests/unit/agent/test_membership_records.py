"""Membership records, pure (``agent.membership_records``): nodes + ASG map -> ``NODE#`` records, roles from labels,
which instances to forget, batches within the API limit, and when an unchanged item's refresh comes due."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from agent.asglookup import DESCRIBE_ASG_INSTANCES_MAX_IDS
from agent.kube.views import NodeView
from agent.membership_records import (
    batches,
    due_at,
    instances_to_forget,
    listed_instances,
    membership_records,
    node_identity,
    node_record,
    node_roles,
    refresh_age_seconds,
)
from core.model import NodeRecord
from tests.unit.agent.membership_world import NOW, node


def test_a_node_named_by_private_dns_maps_to_its_instance_from_the_provider_id() -> None:
    record = node_record(
        node(
            "ip-10-0-1-17.ec2.internal",
            "i-0abc12345678def01",
            "us-east-1b",
            ready=True,
            unschedulable=True,
            labels={"node-role.kubernetes.io/node": "", "kops.k8s.io/instancegroup": "nodes-us-east-1b"},
        ),
        "nodes-us-east-1b.demo.k8s.local",
        NOW,
    )
    assert record == NodeRecord(
        instance_id="i-0abc12345678def01",
        node_name="ip-10-0-1-17.ec2.internal",
        availability_zone="us-east-1b",
        asg_name="nodes-us-east-1b.demo.k8s.local",
        ready=True,
        unschedulable=True,
        roles=["node"],
        instance_group="nodes-us-east-1b",
        reported_at=NOW,
    )


@pytest.mark.parametrize(
    ("unschedulable", "annotations", "ending"),
    [
        (True, {"node-manager.aws/cordoned-by": "spot-1", "node-manager.aws/instance-ending": "spot-1"}, True),
        (True, {"node-manager.aws/cordoned-by": "refresh-r1-0"}, False),  # a refresh's cordon: the instance may stay
        (False, {"node-manager.aws/instance-ending": "spot-1"}, False),  # uncordoned by an operator: it came back
    ],
)
def test_a_node_cordoned_with_the_ending_annotation_is_reported_ending_not_serving(
    unschedulable: bool, annotations: dict[str, str], ending: bool
) -> None:
    view = NodeView(**{**node("n1", ready=True, unschedulable=unschedulable).__dict__, "annotations": annotations})
    record = node_record(view, "nodes", NOW)
    assert record is not None and record.ready
    assert (record.ending, record.serving) == (ending, not ending)


def test_a_node_named_by_instance_id_works_the_same() -> None:
    record = node_record(node("i-0abc12345678def01", "i-0abc12345678def01", ready=False), None, NOW)
    assert record is not None
    assert (record.instance_id, record.node_name, record.ready, record.asg_name) == (
        "i-0abc12345678def01",
        "i-0abc12345678def01",
        False,
        None,
    )


@pytest.mark.parametrize("provider_id", ["", "kind://docker/kind/kind-worker", "aws:///us-east-1a/not-an-instance"])
def test_a_node_without_an_aws_provider_id_has_no_record(provider_id: str) -> None:
    assert node_record(NodeView(name="n", provider_id=provider_id), "asg", NOW) is None


def test_roles_come_from_node_role_labels_and_the_legacy_kops_label() -> None:
    assert node_roles(
        {
            "node-role.kubernetes.io/control-plane": "",
            "node-role.kubernetes.io/master": "",
            "kubernetes.io/role": "master",
            "other": "x",
        }
    ) == ["control-plane", "master"]
    assert node_roles({"kubernetes.io/role": "node"}) == ["node"]
    assert node_roles({}) == [] and node_roles(None) == []


def test_records_for_every_aws_node_with_its_asg() -> None:
    nodes = [node("a", "i-0aaaaaaaaaaaaaaa1"), node("b", "i-0aaaaaaaaaaaaaaa2"), node("c", None)]
    records = membership_records(nodes, {"i-0aaaaaaaaaaaaaaa1": "asg-1"}, NOW)
    assert [(r.node_name, r.asg_name) for r in records] == [("a", "asg-1"), ("b", None)]


def test_instances_without_node_are_forgotten_unless_reported_after_the_list() -> None:
    before, after = NOW - timedelta(seconds=30), NOW + timedelta(seconds=1)
    recorded = {"i-1": before, "i-2": before, "i-3": before, "i-5": after}
    assert instances_to_forget(recorded, ["i-2", "i-4"], listed_at=NOW) == {"i-1", "i-3"}
    assert instances_to_forget({}, ["i-1"], listed_at=NOW) == set()


def test_batches_respect_the_api_limit() -> None:
    ids = [f"i-{n:017x}" for n in range(101)]
    parts = list(batches(ids, DESCRIBE_ASG_INSTANCES_MAX_IDS))
    assert [len(p) for p in parts] == [50, 50, 1]
    assert [i for p in parts for i in p] == ids
    assert list(batches([], 50)) == []


def test_refreshes_of_items_written_together_spread_over_several_resyncs() -> None:
    ids = [f"i-0{n:016x}" for n in range(200)]
    ages = [refresh_age_seconds(i, 600, 60) for i in ids]
    assert all(240 <= age < 480 for age in ages)
    rounds = {int(age // 60) for age in ages}  # the resync (of 60 s) in which each becomes due
    assert rounds == {4, 5, 6, 7}
    assert refresh_age_seconds(ids[0], 100, 60) == 0  # a TTL under two resyncs: written every resync


@pytest.mark.parametrize("seed", range(4))
def test_due_at_is_the_first_instant_refresh_due_says_due(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        reported = NOW + timedelta(microseconds=rng.randrange(10**12))
        age = rng.choice([0.0, rng.uniform(0, 86400), rng.randrange(86400) + rng.randrange(10**6) / 1e6])
        due = due_at(reported, age)
        for now in (due - timedelta(microseconds=1), due, due + timedelta(microseconds=1)):
            assert ((now - reported).total_seconds() >= age) == (now >= due)


def test_listed_instances_learns_new_provider_ids_and_leaves_out_nodes_without_one() -> None:
    a, b, c = node("a", "i-0aaaaaaaaaaaaaaa1"), node("b", "i-0bbbbbbbbbbbbbbb2"), node("c", "i-0ccccccccccccccc3")
    stray = node("stray", None)
    known: dict[str, str] = {}
    asked: list[str] = []

    def identity(view: NodeView) -> tuple[str, str] | None:
        asked.append(view.name)
        return node_identity(view)

    assert listed_instances([a, stray, b], known, identity) == ([a, b], ["i-0aaaaaaaaaaaaaaa1", "i-0bbbbbbbbbbbbbbb2"])
    assert asked == ["a", "stray", "b"]
    assert known == {a.provider_id: "i-0aaaaaaaaaaaaaaa1", b.provider_id: "i-0bbbbbbbbbbbbbbb2"}
    page = [b, a]
    listed, ids = listed_instances(page, known, identity)
    assert listed is page and ids == ["i-0bbbbbbbbbbbbbbb2", "i-0aaaaaaaaaaaaaaa1"]  # all known: none parsed again
    assert asked == ["a", "stray", "b"]
    assert listed_instances([c, b, stray], known, identity) == ([c, b], ["i-0ccccccccccccccc3", "i-0bbbbbbbbbbbbbbb2"])
    assert asked == ["a", "stray", "b", "c", "stray"]
