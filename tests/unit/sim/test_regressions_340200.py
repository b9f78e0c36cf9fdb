"""Seed 340200 of the ``resize`` profile (30 nodes x 2 days, found on its first soak), kept as a regression case of a
product bug: "8 every shortfall covered within a bound" (docs/SIMULATION.md, "Findings").

During an outage of ``us-east-1c`` an operator refreshed ``nodes-us-east-1a`` (``max_surge`` 2; own size 10). kOps
resized it up by 2 (19.04 h: MinSize 12, MaxSize 13; Auto Scaling raised desired capacity to 12, over the run's
10 + 1), and 221 s later down by 2 (MinSize 9, MaxSize 11; desired capacity clamped to 11). The refresher read the
first write on two passes and did nothing with it; its last step's terminate read only the second, decremented
(10), and the run's end restored MaxSize to its original 10. The group ended one below the 11 Auto Scaling's clamps
made its own size, with 1c out and 1b able to grow. The refresher now keeps the highest MinSize it read under its
units (``worker.track_floor``): that terminate goes without decrement, the unit is the group's own, and MaxSize is not
restored below it.
"""

from __future__ import annotations

import pytest

from sim.run import run_seed
from sim.schedules import RESIZE, Fault

# the resize profile's 131 entries shrunk (``sim.run.shrink_seed``, on the refresher before the fix)
SHRUNK = (
    Fault(65407.675, "outage", 7830.679, (("az", "us-east-1c"),)),
    Fault(67521.601, "manual_refresh", params=(("az", "us-east-1a"), ("max_surge", 2))),
    Fault(68527.14, "kops_spec", params=(("above", 1), ("az", "us-east-1a"), ("below", 0), ("grow", 2))),
    Fault(68748.79, "kops_spec", params=(("above", 1), ("az", "us-east-1a"), ("below", 1), ("grow", -2))),
)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_a_min_size_raised_and_lowered_under_a_surge_keeps_the_group_at_its_own_size(
    schedule: tuple[Fault, ...] | None,
) -> None:
    result = run_seed(340200, 30, 2.0, schedule=schedule, profile=RESIZE, trace=True)
    assert result.violation is None, result.summary()
    trace = "\n".join(result.trace)
    assert "nodes-us-east-1a: MinSize 12, MaxSize 13 under the run's surge units: its own size is at least 12" in trace
    assert "without decrement: MinSize or a resize keeps the surge unit" in trace
