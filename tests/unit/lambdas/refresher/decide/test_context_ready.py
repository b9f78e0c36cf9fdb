"""``Context.ready_besides``: ``GroupFacts.live`` and ``World.ready`` looked at in line answer as the two do."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from bench.run_pass import SETTINGS, scenario
from core.kops import Role
from core.model import NodeRecord
from lambdas.refresher.decide.context import Context
from lambdas.refresher.world import GroupFacts, InstanceFacts, World

T0 = datetime(2024, 3, 5, 10, 0, tzinfo=UTC)
IDS = [f"i-{k}" for k in range(6)]
STATES = ["InService", "Pending", "Pending:Wait", "Terminating", "Terminated", "Detached", "Standby"]


@given(
    st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from(STATES)), max_size=8),
    st.dictionaries(st.sampled_from(IDS), st.booleans()),
    st.sets(st.sampled_from(IDS)),
)
@settings(max_examples=300, deadline=None)
def test_ready_besides_counts_as_live_and_ready_do(
    instances: list[tuple[str, str]], ready: dict[str, bool], exclude: set[str]
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
    plain = sum(1 for i in facts.live if i.instance_id not in exclude and world.ready(i.instance_id))
    assert Context(run, world, SETTINGS, run.updated_at).ready_besides(facts, exclude) == plain
