"""``Context.ready_besides`` (a group's Ready live instances found once a pass) and ``GroupFacts.instance``/``live``
(made once a ``GroupFacts``) answer as the plain scans of the instances do."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lambdas.refresher.world_read as advance
from adapters.dynamo.node_memo import NodeRecordMemo
from bench.run_pass import SETTINGS, scenario
from core.kops import Role
from core.model import NodeRecord
from core.runs import StepState
from lambdas.refresher.decide.context import Context
from lambdas.refresher.gather import GatherMemo
from lambdas.refresher.world import LIVE_STATES, GroupFacts, InstanceFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
IDS = [f"i-{k}" for k in range(6)]
STATES = ["InService", "Pending", "Pending:Wait", "Terminating", "Terminated", "Detached", "Standby"]


def group(instances: list[tuple[str, str]]) -> GroupFacts:
    """A worker group "g" of ``instances`` (id, lifecycle state), its desired capacity their number."""
    return GroupFacts(
        name="g",
        role=Role.NODE,
        instance_group="nodes",
        min_size=0,
        max_size=9,
        desired=len(instances),
        instances=tuple(InstanceFacts(instance_id=i, lifecycle_state=s) for i, s in instances),
    )


@given(
    st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(STATES)), max_size=8),
    st.dictionaries(st.sampled_from(IDS), st.tuples(st.booleans(), st.booleans())),
    st.sets(st.sampled_from(IDS)),
    st.sets(st.sampled_from(IDS)),
)
@settings(max_examples=300, deadline=None)
def test_ready_besides_counts_as_live_and_serving_do(
    instances: list[tuple[str, str]], ready: dict[str, tuple[bool, bool]], exclude: set[str], other: set[str]
) -> None:
    """(Ready, ending) of each record: a Ready node cordoned for a Spot warning is not counted."""
    run, _ = scenario(3)
    nodes = {
        i: NodeRecord(instance_id=i, node_name=f"n-{i}", ready=r, unschedulable=e, ending=e, reported_at=T0)
        for i, (r, e) in ready.items()
    }
    world = World(nodes=nodes)
    facts = group(instances)
    live = [i for i in facts.instances if i.lifecycle_state in LIVE_STATES]
    assert list(facts.live) == live and facts.live is facts.live

    def plain(besides: set[str]) -> int:
        return sum(
            1
            for i in live
            if i.instance_id not in besides and (r := nodes.get(i.instance_id)) and r.ready and not r.ending
        )

    context = Context(run, world, SETTINGS, run.updated_at)
    assert context.ready_besides(facts, exclude) == plain(exclude)
    assert context.ready_besides(facts, other) == plain(other)  # the group's Ready ids from the pass's first count
    for iid in [*IDS, "i-none"]:  # the first listed of an id, as a scan finds it
        first = next((i for i in facts.instances if i.instance_id == iid), None)
        assert facts.instance(iid) is first
        assert facts.has_live(iid) == (first is not None and first.lifecycle_state in LIVE_STATES)


@given(
    st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(STATES)), max_size=8),
    st.sets(st.sampled_from(IDS)),
    st.lists(st.sampled_from([None, *IDS]), min_size=3, max_size=3),
    st.lists(st.sampled_from(IDS), min_size=3, max_size=3),
)
@settings(max_examples=300, deadline=None)
def test_new_instances_are_the_live_ones_of_no_step_nor_baseline(
    instances: list[tuple[str, str]], baseline: set[str], spares: list[str | None], olds: list[str]
) -> None:
    base, _ = scenario(3)
    steps = [  # three steps in flight, each with an old instance and maybe a spare
        s.model_copy(update={"state": StepState.SURGING, "instance_id": old, "surge_instance_id": spare})
        for s, old, spare in zip(base.steps, olds, spares, strict=True)
    ]
    run = base.model_copy(update={"steps": steps})
    facts = group(instances)
    context = Context(run, World(), SETTINGS, run.updated_at)
    step = context.run.steps[0]  # the pass's own copy (a step in flight)
    step.surge_baseline = sorted(baseline)
    claimed = {s.surge_instance_id for s in context.run.steps[1:] if s.surge_instance_id}
    plain = [
        i.instance_id
        for i in facts.instances
        if i.lifecycle_state in LIVE_STATES
        and i.instance_id not in baseline
        and i.instance_id not in claimed
        and i.instance_id not in olds
    ]
    assert context.new_instances(step, facts) == plain
    assert facts.live_ids == tuple(i.instance_id for i in facts.live) and facts.live_ids is facts.live_ids


def test_the_worlds_of_the_memos_map_again_share_the_ready_ids_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # a pass after a reused membership read gathers the memo's own map again: its groups' Ready ids, found by an
    # earlier pass for the same facts, are not looked for again; any other list of records is keyed anew, and so are
    # its Ready ids
    monkeypatch.setattr(advance, "read_groups", lambda *args, **kwargs: {})
    monkeypatch.setattr(advance, "looked_at_commands", lambda run, states=None: [])
    monkeypatch.setattr(advance, "may_start_a_group", lambda run, states=None: False)
    deps, records = _environment(0)
    run, _ = scenario(3)
    facts = group([(i, "InService") for i in IDS])
    first, again = advance.gather(run, deps, records), advance.gather(run, deps, records)
    found = Context(run, first, SETTINGS, T0).ready_live(facts)
    assert found == IDS[::2] and Context(run, again, SETTINGS, T0).ready_live(facts) is found
    other = advance.gather(run, deps, list(records))  # the same records, another list: keyed anew
    assert other.nodes == first.nodes and other.ready_live == {}
    assert Context(run, other, SETTINGS, T0).ready_live(facts) == found
    same = dataclasses.replace(facts)  # equal facts, another object: looked for again
    assert Context(run, again, SETTINGS, T0).ready_live(same) == found and again.ready_live["g"][0] is same


def test_two_environments_keep_their_own_ready_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    # two execution environments (two ``Deps`` in one process: the simulation's, tests'), each gathering its own
    # membership memo's map in turn: each world shares the Ready ids its own environment found, never the other's
    monkeypatch.setattr(advance, "read_groups", lambda *args, **kwargs: {})
    monkeypatch.setattr(advance, "looked_at_commands", lambda run, states=None: [])
    monkeypatch.setattr(advance, "may_start_a_group", lambda run, states=None: False)
    run, _ = scenario(3)
    facts = group([(i, "InService") for i in IDS])
    envs = [_environment(parity) for parity in (0, 1)]
    found = [Context(run, advance.gather(run, deps, records), SETTINGS, T0).ready_live(facts) for deps, records in envs]
    assert found == [IDS[::2], IDS[1::2]]
    for _ in range(2):  # in turn: each from its own environment's last world
        for (deps, records), ready in zip(envs, found, strict=True):
            assert Context(run, advance.gather(run, deps, records), SETTINGS, T0).ready_live(facts) is ready


def _environment(parity: int) -> tuple[SimpleNamespace, list[NodeRecord]]:
    """An execution environment's deps (its own membership and gather memos) and the records its memo read: the
    instances of ``IDS`` at even (``parity`` 0) or odd places Ready."""
    memo = NodeRecordMemo()
    items = [
        {"sk": f"NODE#{i}", "instance_id": i, "node_name": i, "ready": k % 2 == parity, "reported_at": T0.isoformat()}
        for k, i in enumerate(IDS)
    ]
    records, _ = memo.records(items, T0, version="t:1", now=T0)
    deps = SimpleNamespace(
        clock=lambda: T0,
        aws=SimpleNamespace(autoscaling=None, ec2=None),
        settings=SETTINGS,
        memo=memo,
        gather_memo=GatherMemo(),
    )
    return deps, records  # the memo's own list: gathered again, it is keyed once (``NodeRecordMemo.by_instance``)
