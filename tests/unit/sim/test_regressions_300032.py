"""Storm seed 300032 (30 nodes x 2 days, found on today's ``STORM``), kept as a regression case of a product bug:
"8 every shortfall covered within a bound" (docs/SIMULATION.md, "Findings").

``nodes-us-east-1b``'s kOps spec gave it MinSize 9 under its size of 10 (0 h); another tool terminated one of its
instances with decrement (7.63 h), leaving it at 9. During an outage of ``us-east-1a`` (30.96 h, 179 min) Spot
reclaimed two of 1a's nodes (31.41 h); the replenisher covered them by raising 1b 9 -> 10 and 1c 10 -> 11. Then a
``kops update cluster`` wrote 1b's spec with minSize 10 (31.47 h), its size: desired capacity stayed at 10, so
``decide.reality.reconcile_donors`` read the raise as held, while the unit was now 1b's own. The pool ran 29 of its
kOps sizes' 30 with 1c able to grow, past the 3,600 s bound. The donor's own size is now the larger of
``desired_before`` and its MinSize now: the units under that floor are a reset, and the shortfall moves to 1c.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lambdas.replenisher import decide as replenisher_decide
from lambdas.replenisher.decide import reality
from sim.run import run_seed
from sim.schedules import STORM, Fault

INVARIANT_8 = "8 every shortfall covered within a bound"
# the storm profile's 109 entries shrunk (``sim.run.shrink_seed``, on the replenisher before the fix)
SHRUNK = (
    Fault(0.0, "kops_spec", params=(("above", 2), ("az", "us-east-1b"), ("below", 1))),
    Fault(27473.544, "foreign_terminate", params=(("az", "us-east-1b"), ("decrement", 1), ("target", "spare"))),
    Fault(111438.166, "outage", 10736.442, (("az", "us-east-1a"),)),
    Fault(113080.594, "spot_burst", 132.515, (("az", "us-east-1a"), ("count", 2))),
    Fault(113299.889, "kops_spec", params=(("above", 2), ("az", "us-east-1b"), ("below", 0))),
)


def without_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconcile as it was: a donor's own size is its ``desired_before`` whatever its MinSize now."""
    reconcile = reality.reconcile_donors

    def as_before(b: Any) -> None:
        world = b.world
        b.world = replace(world, groups={n: replace(g, min_size=0) for n, g in world.groups.items()})
        try:
            reconcile(b)
        finally:
            b.world = world

    monkeypatch.setattr(replenisher_decide, "reconcile_donors", as_before)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_a_donor_floor_raised_under_a_compensation_is_covered_again(schedule: tuple[Fault, ...] | None) -> None:
    result = run_seed(300032, 30, 2.0, schedule=schedule, profile=STORM, trace=True)
    assert result.violation is None, result.summary()
    assert "nodes-us-east-1b holds 0 of the 1 it carries for nodes-us-east-1a" in "\n".join(result.trace)


@pytest.mark.parametrize("schedule", [None, SHRUNK], ids=["seed", "shrunk"])
def test_without_the_floor_the_seed_breaks_invariant_8(
    monkeypatch: pytest.MonkeyPatch, schedule: tuple[Fault, ...] | None
) -> None:
    without_the_floor(monkeypatch)
    result = run_seed(300032, 30, 2.0, schedule=schedule, profile=STORM)
    assert result.violation is not None
    assert result.violation.invariant == INVARIANT_8
    assert "pool nodes short 1 of 30 since t=113340" in result.violation.detail, result.violation.detail
