"""``Context.ready_besides`` (a group's Ready live instances found once a pass) and ``GroupFacts.instance``/``live``
(made once a ``GroupFacts``) answer as the plain scans of the instances do."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.run_pass import SETTINGS, scenario
from core.kops import Role
from core.model import NodeRecord
from core.runs import StepState
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import LIVE_STATES, GroupFacts, InstanceFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
IDS = [f"i-{k}" for k in range(6)]
STATES = ["InService", "Pending", "Pending:Wait", "Terminating", "Terminated", "Detached", "Standby"]


@given(
    st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(STATES)), max_size=8),
    st.dictionaries(st.sampled_from(IDS), st.booleans()),
    st.sets(st.sampled_from(IDS)),
    st.sets(st.sampled_from(IDS)),
)
@settings(max_examples=300, deadline=None)
def test_ready_besides_counts_as_live_and_ready_do(
    instances: list[tuple[str, str]], ready: dict[str, bool], exclude: set[str], other: set[str]
) -> None:
    run, _ = scenario(3)
    nodes = {i: NodeRecord(instance_id=i, node_name=f"n-{i}", ready=r, reported_at=T0) for i, r in ready.items()}
    world = World(nodes=nodes)
    facts = GroupFacts(
        name="g",
        role=Role.NODE,
        instance_group="nodes",
        min_size=0,
        max_size=9,
        desired=len(instances),
        instances=tuple(InstanceFacts(instance_id=i, lifecycle_state=s) for i, s in instances),
    )
    live = [i for i in facts.instances if i.lifecycle_state in LIVE_STATES]
    assert list(facts.live) == live and facts.live is facts.live

    def plain(besides: set[str]) -> int:
        return sum(1 for i in live if i.instance_id not in besides and (r := nodes.get(i.instance_id)) and r.ready)

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
    facts = GroupFacts(
        name="g",
        role=Role.NODE,
        instance_group="nodes",
        min_size=0,
        max_size=9,
        desired=len(instances),
        instances=tuple(InstanceFacts(instance_id=i, lifecycle_state=s) for i, s in instances),
    )
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
