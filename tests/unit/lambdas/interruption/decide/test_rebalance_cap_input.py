"""Rule 5d against what the agent partition may hold: a malformed `CMD#rebalance-` item of another instance is read
as holding no cordon (it failed every recommendation of the cluster: a review finding), and a share of 100 caps
nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lambdas.interruption.decide import decide
from lambdas.interruption.execute import Effects
from lambdas.interruption.gather import read_rebalance_load
from tests.unit.lambdas.interruption.decision_world import INSTANCE, NOW, T0, kinds, rebalance, settings, world
from tests.unit.lambdas.interruption.effects_world import record_cordon

OTHER = "i-0000000000000000b"
# CMD#rebalance- items of another instance, of shapes the agent's role can write (the agent's releaser reads the same
# range and takes such items as carrying nothing; the instance's own commands go through handler.readable_commands)
MALFORMED = [
    {"command": "garbage"},
    {"command": ["x"]},
    {"command": {"command_id": "rebalance-x", "options": ["x"]}},
    {"command": {"command_id": "rebalance-x", "options": "x"}},
]


@pytest.mark.parametrize("shape", MALFORMED)
def test_a_malformed_rebalance_item_of_another_instance_does_not_fail_every_recommendation(
    effects: Effects, shape: dict[str, Any]
) -> None:
    record_cordon(effects, "rebalance-a", "i-0000000000000000a", "succeeded")  # one well-formed cordon in effect
    effects.store.table.put_item(
        Item={
            "pk": effects.store.agent_pk,
            "sk": "CMD#rebalance-x",
            "kind": "cordon",
            "instance_id": OTHER,
            "status": "succeeded",
            "finished_at": T0.isoformat(),
            **shape,
        }
    )
    effects.store.put_membership_mark(T0, 40, ttl_seconds=3600)
    # read as holding no cordon: it used to raise in decide.rebalance.releasable for every first delivery of every
    # instance of the cluster (invariant 7: bad input is never a crash loop)
    assert read_rebalance_load(effects.store, INSTANCE) == (1, 40)


def test_rebalance_max_cordoned_percent_100_means_no_cap() -> None:
    # core/settings/interruption.py: "100: no cap". With the membership count lagging a newly launched node (or
    # counting instances already gone), 3 cordons in effect among a count of 3 still caps the 4th recommendation.
    loaded = replace(world(), rebalance_cordons=3, cluster_nodes=3)
    plan = decide(rebalance(), NOW, settings(rebalance_max_cordoned_percent=100), loaded)
    assert plan.acknowledged is None and kinds(plan) == ["RecordCommand", "SendCommand"], plan
