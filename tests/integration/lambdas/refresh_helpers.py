"""What the refresher's tests on the local world share (``test_refresher.py``, ``test_refresher_operator.py``): the
harness that runs a refresh against the world, the capacity invariant at a run's end, a node by its instance.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from scenarios.refreshing import RefreshHarness


@contextlib.contextmanager
def harness(world: Any, info: Any, **kwargs: Any) -> Iterator[RefreshHarness]:
    h = RefreshHarness(world, info, **kwargs).start()
    try:
        yield h
    finally:
        h.stop()


def assert_capacity_restored(h: RefreshHarness, before: dict[str, dict[str, Any]]) -> None:
    """Invariant 4: desired capacity and MaxSize where they were, exactly that many instances, none outside."""
    after = h.groups()
    for name, group in before.items():
        assert after[name]["DesiredCapacity"] == group["DesiredCapacity"], name
        assert after[name]["MaxSize"] == group["MaxSize"], name
        assert len(after[name]["Instances"]) == group["DesiredCapacity"], name
    in_groups = {i["InstanceId"] for g in after.values() for i in g["Instances"]}
    assert h.running_instances() == in_groups, "an instance is running outside its group"


def node_of(world: Any, instance_id: str) -> dict[str, Any]:
    node = world.simulator.node_for_instance(instance_id)
    assert node is not None
    return node
