"""Seed 330090 of the ``resize`` profile (30 nodes x 2 days, found on its first soak), kept as a regression case of
a checker bug: "4 sizes end where they were" refused a MaxSize the product had to leave at the group's desired
capacity (docs/SIMULATION.md, "Findings").

Two AZs out at once (``us-east-1c`` at 24.47 h, ``us-east-1a`` at 24.82 h) and two of 1a's nodes reclaimed (25.34 h):
the replenisher raised ``nodes-us-east-1b``, the healthy sibling, for both. Then kOps resized 1b up by 2 (25.59 h:
MinSize 1 below its new size, MaxSize at it): Auto Scaling clamped desired capacity into the new MinSize and MaxSize,
below the raise. The replenisher read the reset, and at the give-back restored MaxSize towards its original before
the raises (a MaxSize kOps writes under a raise of ours cannot be told from our own: docs/DESIGN.md, "kOps owns the
ASGs' sizes"), which the end check accepts (``World.restore_excused``). That original was under the new MinSize, so
the give-back left MaxSize at the desired capacity ("MaxSize left at ..., its desired capacity, above the original
..."): MaxSize is never below it. The end check accepted the original only exactly; an excused original under the
group's desired capacity is now accepted as that capacity.
"""

from __future__ import annotations

import pytest

from sim.run import run_seed
from sim.schedules import RESIZE, Fault
from sim.world import World

# the resize profile's 127 entries shrunk (``sim.run.shrink_seed``, on the checker before the fix)
SHRUNK = (
    Fault(88107.106, "outage", 10878.062, (("az", "us-east-1c"),)),
    Fault(89352.698, "outage", 11663.945, (("az", "us-east-1a"),)),
    Fault(91240.931, "spot_burst", 223.307, (("az", "us-east-1a"), ("count", 2))),
    Fault(92136.919, "kops_spec", params=(("above", 0), ("az", "us-east-1b"), ("below", 1), ("grow", 2))),
)


@pytest.mark.parametrize(
    ("schedule", "left", "spec_max", "original"),
    [(None, 8, 9, 7), (SHRUNK, 11, 12, 10)],  # the seed resized 1b down by 2 first (24.28 h); the shrunk run did not
    ids=["seed", "shrunk"],
)
def test_a_max_size_left_at_desired_capacity_over_an_excused_original_holds(
    schedule: tuple[Fault, ...] | None, left: int, spec_max: int, original: int
) -> None:
    worlds: list[World] = []
    result = run_seed(330090, 30, 2.0, schedule=schedule, profile=RESIZE, trace=True, mutate=worlds.append)
    assert result.violation is None, result.summary()
    note = f"nodes-us-east-1b: MaxSize left at {left}, its desired capacity, above the original {original}"
    assert note in "\n".join(result.trace)
    world = worlds[0]
    group = world.cloud.groups["nodes-us-east-1b"]
    # the case the rule is for: neither the spec's MaxSize nor the excused original
    assert (group.desired, group.max_size) == (left, left)
    assert world.sizes_at_start["nodes-us-east-1b"] == (left, spec_max)
    assert world.view.restore_excused()["nodes-us-east-1b"] == {original}
