"""``View.group_states`` (each group's state kept by name and made again only when what it is made of changed)
answers what the general ``group_state`` does for every group, as random changes move the groups' sizes, zones and
the tags the pool and the master flag come from (a memo keyed on less than ``group_state`` reads fails it)."""

from __future__ import annotations

import random

import pytest

from core.kops import INSTANCE_GROUP_TAG, POOL_TAG
from sim.view import group_state
from sim.world import Shape, World

TAGS = (POOL_TAG, INSTANCE_GROUP_TAG, "k8s.io/role/master", "k8s.io/role/control-plane")
VALUES = ("", "nodes", "nodes-us-east-1a", "spot-us-east-1b", "masters-us-east-1c", "pool-b")
ZONES = (("us-east-1a",), ("us-east-1b",), ("us-east-1a", "us-east-1b"), ("us-east-1c", "us-east-1a"))


@pytest.mark.parametrize("seed", range(5))
def test_group_states_are_the_general_ones_as_the_groups_change(seed: int) -> None:
    rng = random.Random(seed)
    world = World.build(seed, Shape(nodes=3, masters=1, pods_per_node=1, replicas=1))
    groups = world.cloud.groups
    for _ in range(300):
        g = groups[rng.choice(sorted(groups))]
        change = rng.randrange(6)
        if change == 0:
            g.desired = rng.randrange(5)
        elif change == 1:
            g.min_size = rng.randrange(3)
        elif change == 2:
            g.max_size = rng.randrange(3, 9)
        elif change == 3:
            g.zones = rng.choice(ZONES)
        elif change == 4:
            g.tags[rng.choice(TAGS)] = rng.choice(VALUES)
        else:
            g.tags.pop(rng.choice(TAGS), None)
        assert world.view.group_states() == [group_state(g) for g in groups.values()]
